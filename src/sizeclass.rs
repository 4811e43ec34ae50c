//! Size classes: which bucket a request of `n` bytes is counted in.
//!
//! 16-byte steps up to 512 bytes (CPython's small-object classes), then four classes per power of
//! two (as jemalloc does) up to the largest size a `Layout` can hold. A class is named by its
//! largest size: a 20-byte request is in class 32, a 600-byte one in class 640.

/// Requests up to this many bytes use 16-byte classes.
pub const SMALL_MAX: usize = 512;
const SMALL_CLASSES: usize = SMALL_MAX / 16;
/// Number of classes: 32 small ones, then 4 per power of two from 2^9 to 2^63.
pub const NUM_CLASSES: usize = SMALL_CLASSES + 4 * (63 - 9);

/// The class index of a request of `n` bytes (`n == 0` is counted with the 16-byte class).
#[inline]
pub fn class_of(n: usize) -> usize {
    if n <= SMALL_MAX {
        n.saturating_sub(1) >> 4
    } else {
        let m = n - 1;
        let p = (usize::BITS - 1 - m.leading_zeros()) as usize; // floor(log2(n - 1)) >= 9
        SMALL_CLASSES + (p - 9) * 4 + ((m >> (p - 2)) & 3)
    }
}

/// The largest request size counted in class `idx` (the class's name in reports).
pub fn class_size(idx: usize) -> u64 {
    if idx < SMALL_CLASSES {
        (idx as u64 + 1) * 16
    } else {
        let k = idx - SMALL_CLASSES;
        let p = 9 + (k / 4) as u32;
        (1u64 << p) + ((k % 4) as u64 + 1) * (1u64 << (p - 2))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_requests_use_sixteen_byte_steps() {
        assert_eq!(class_size(class_of(1)), 16);
        assert_eq!(class_size(class_of(16)), 16);
        assert_eq!(class_size(class_of(17)), 32);
        assert_eq!(class_size(class_of(512)), 512);
        assert_eq!(class_of(512), 31);
    }

    #[test]
    fn large_requests_use_four_classes_per_power_of_two() {
        assert_eq!(class_size(class_of(513)), 640);
        assert_eq!(class_size(class_of(640)), 640);
        assert_eq!(class_size(class_of(641)), 768);
        assert_eq!(class_size(class_of(1024)), 1024);
        assert_eq!(class_size(class_of(1025)), 1280);
        assert_eq!(class_size(class_of(100_000)), 114_688);
    }

    #[test]
    fn every_size_fits_its_class_and_not_the_one_below() {
        for n in (1..5000).chain([isize::MAX as usize, 1 << 40, (1 << 40) + 1]) {
            let c = class_of(n);
            assert!(c < NUM_CLASSES, "n={n}");
            assert!(n as u64 <= class_size(c), "n={n}");
            if c > 0 {
                assert!(n as u64 > class_size(c - 1), "n={n}");
            }
        }
    }
}
