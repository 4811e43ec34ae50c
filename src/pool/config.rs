//! `PoolConfig` and the geometry derived from it (shifts, class sizes, blocks per pool).

/// The shape of a [`Pool`](crate::Pool): arena and pool sizes, size-class step, the largest
/// request served from pools, and whether wholly empty arenas go back to the inner allocator.
///
/// All sizes are powers of two, `alignment >= 8`, `pool_size < arena_size <= 2^31`,
/// `arena_size >= 2^16`, at most 255 pools per arena, at most 64 size classes
/// (`max_small / alignment`), and a pool must hold at least two blocks of the largest class.
/// [`Pool::with_config`](crate::Pool::with_config) panics (at compile time when used in a
/// `static`) on a configuration that breaks these rules.
///
/// ```
/// use heapdelta::PoolConfig;
/// let c = PoolConfig::CPYTHON;
/// assert_eq!((c.arena_size, c.pool_size, c.alignment, c.max_small), (1 << 20, 16 << 10, 16, 512));
/// assert!(!PoolConfig::CPYTHON_LEGACY.release_empty_arenas);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolConfig {
    /// Bytes per arena (the unit obtained from, and returned to, the inner allocator).
    pub arena_size: usize,
    /// Bytes per pool (every pool holds blocks of one size class).
    pub pool_size: usize,
    /// Size-class step and block alignment.
    pub alignment: usize,
    /// Largest request served from pools; larger ones go to the inner allocator.
    pub max_small: usize,
    /// Whether wholly empty arenas go back to the inner allocator (CPython 2.5+).
    pub release_empty_arenas: bool,
}

impl PoolConfig {
    /// CPython 3.10+ on 64-bit: 1 MiB arenas, 16 KiB pools, 16-byte classes up to 512 bytes,
    /// empty arenas released (keeping at most one wholly free arena).
    ///
    /// ```
    /// assert_eq!(heapdelta::PoolConfig::CPYTHON.arena_size / heapdelta::PoolConfig::CPYTHON.pool_size, 64);
    /// ```
    pub const CPYTHON: PoolConfig = PoolConfig {
        arena_size: 1 << 20,
        pool_size: 16 << 10,
        alignment: 16,
        max_small: 512,
        release_empty_arenas: true,
    };

    /// CPython before 2.5: 256 KiB arenas, 4 KiB pools, 8-byte classes up to 256 bytes, arenas
    /// never released.
    ///
    /// ```
    /// assert_eq!(heapdelta::PoolConfig::CPYTHON_LEGACY.max_small, 256);
    /// ```
    pub const CPYTHON_LEGACY: PoolConfig = PoolConfig {
        arena_size: 256 << 10,
        pool_size: 4 << 10,
        alignment: 8,
        max_small: 256,
        release_empty_arenas: false,
    };
}

/// Most size classes any configuration may have.
pub(crate) const MAX_CLASSES: usize = 64;
/// Length of `nfp2lasta` (indices 0..=pools per arena); pools per arena is at most 255.
pub(crate) const NFP_LEN: usize = 256;
/// `sizeof(struct pool_header)` on 64-bit before rounding to the alignment.
const HEADER_BYTES: usize = 48;
/// Only addresses below 2^57 can hold an arena (the arena map covers them).
pub(crate) const ADDRESS_BITS: u32 = 57;

/// Everything derived from a `PoolConfig`, computed once at construction.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Geometry {
    pub arena_size: usize,
    pub arena_shift: u32,
    pub pool_size: usize,
    pub align_shift: u32,
    pub alignment: usize,
    pub max_small: usize,
    pub nclasses: usize,
    pub overhead: usize,
    pub pools_per_arena: u32,
    pub release: bool,
}

impl Geometry {
    /// Validates `c` (panicking on a bad configuration) and derives the geometry.
    pub const fn new(c: PoolConfig) -> Geometry {
        assert!(
            c.alignment.is_power_of_two() && c.alignment >= 8,
            "PoolConfig: alignment must be a power of two, at least 8"
        );
        assert!(
            c.pool_size.is_power_of_two() && c.arena_size.is_power_of_two(),
            "PoolConfig: pool_size and arena_size must be powers of two"
        );
        assert!(
            c.arena_size >= 1 << 16 && c.arena_size <= 1 << 31,
            "PoolConfig: arena_size must be from 64 KiB (2^16) to 2 GiB (2^31)"
        );
        assert!(
            c.pool_size < c.arena_size,
            "PoolConfig: pool_size must be less than arena_size"
        );
        assert!(
            c.arena_size / c.pool_size < NFP_LEN,
            "PoolConfig: an arena must hold at most 255 pools (arena_size / pool_size)"
        );
        assert!(
            c.max_small >= c.alignment && c.max_small.is_multiple_of(c.alignment),
            "PoolConfig: max_small must be a multiple of alignment, at least alignment"
        );
        assert!(
            c.max_small / c.alignment <= MAX_CLASSES,
            "PoolConfig: at most 64 size classes (max_small / alignment)"
        );
        let overhead = (HEADER_BYTES + c.alignment - 1) & !(c.alignment - 1);
        assert!(
            c.pool_size > overhead,
            "PoolConfig: pool_size must exceed a pool's header (48 bytes, rounded up to alignment)"
        );
        assert!(
            (c.pool_size - overhead) / c.max_small >= 2,
            "PoolConfig: a pool must hold at least two blocks of max_small bytes after its header"
        );
        Geometry {
            arena_size: c.arena_size,
            arena_shift: c.arena_size.trailing_zeros(),
            pool_size: c.pool_size,
            align_shift: c.alignment.trailing_zeros(),
            alignment: c.alignment,
            max_small: c.max_small,
            nclasses: c.max_small / c.alignment,
            overhead,
            pools_per_arena: (c.arena_size / c.pool_size) as u32,
            release: c.release_empty_arenas,
        }
    }

    /// The class of a request of `n` bytes (1 <= n <= max_small; 0 is put in class 0).
    #[inline]
    pub fn class_of(&self, n: usize) -> usize {
        n.saturating_sub(1) >> self.align_shift
    }

    /// Block size of class `i`.
    #[inline]
    pub fn class_size(&self, i: usize) -> usize {
        (i + 1) << self.align_shift
    }

    /// Blocks per pool of class `i` (`NUMBLOCKS`).
    #[inline]
    pub fn numblocks(&self, i: usize) -> usize {
        (self.pool_size - self.overhead) / self.class_size(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The message `Geometry::new` panics with for `c`.
    fn refusal(c: PoolConfig) -> String {
        let err = std::panic::catch_unwind(|| Geometry::new(c)).unwrap_err();
        err.downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| err.downcast_ref::<String>().cloned())
            .unwrap_or_default()
    }

    #[test]
    fn a_bad_configuration_is_refused_with_the_rule_it_breaks() {
        let c = PoolConfig::CPYTHON;
        for (bad, rule) in [
            (
                PoolConfig { alignment: 24, ..c },
                "alignment must be a power of two",
            ),
            (
                PoolConfig {
                    pool_size: 1 << 20,
                    ..c
                },
                "pool_size must be less than arena_size",
            ),
            (
                PoolConfig {
                    arena_size: 1 << 15,
                    ..c
                },
                "arena_size must be from 64 KiB",
            ),
            (
                PoolConfig {
                    pool_size: 4096,
                    ..c
                },
                "at most 255 pools",
            ),
            (
                PoolConfig {
                    max_small: 520,
                    ..c
                },
                "max_small must be a multiple of alignment",
            ),
            (
                PoolConfig {
                    max_small: 1024,
                    alignment: 8,
                    ..c
                },
                "at most 64 size classes",
            ),
            (
                PoolConfig {
                    arena_size: 1 << 16,
                    pool_size: 4096,
                    alignment: 64,
                    max_small: 4096,
                    ..c
                },
                "at least two blocks of max_small",
            ),
            (
                PoolConfig {
                    arena_size: 1 << 16,
                    pool_size: 4096,
                    alignment: 4096,
                    max_small: 4096,
                    ..c
                },
                "must exceed a pool's header",
            ),
        ] {
            let message = refusal(bad);
            assert!(message.starts_with("PoolConfig: "), "{bad:?}: {message}");
            assert!(message.contains(rule), "{bad:?}: {message}");
        }
    }

    #[test]
    fn cpython_geometry_matches_obmalloc() {
        let g = Geometry::new(PoolConfig::CPYTHON);
        assert_eq!((g.nclasses, g.overhead, g.pools_per_arena), (32, 48, 64));
        let nb: Vec<usize> = [0, 1, 2, 3, 7, 15, 31]
            .iter()
            .map(|&i| g.numblocks(i))
            .collect();
        assert_eq!(nb, [1021, 510, 340, 255, 127, 63, 31]);
        assert_eq!(g.class_of(1), 0);
        assert_eq!(g.class_of(16), 0);
        assert_eq!(g.class_of(17), 1);
        assert_eq!(g.class_of(512), 31);
    }

    #[test]
    fn legacy_geometry_uses_eight_byte_classes() {
        let g = Geometry::new(PoolConfig::CPYTHON_LEGACY);
        assert_eq!((g.nclasses, g.overhead, g.pools_per_arena), (32, 48, 64));
        assert_eq!(g.numblocks(0), (4096 - 48) / 8);
    }
}
