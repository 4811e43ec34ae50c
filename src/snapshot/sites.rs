//! `SiteList`: a snapshot's call-site counters, kept in chunks that the checkpoints of a timeline
//! share for as long as the chunk's counters do not change.
//!
//! A long run's timeline holds every call site at every checkpoint; most of them (start-up code,
//! rare paths) stop changing early. Sharing their chunks makes the timeline grow with the sites
//! that changed in each step rather than with all of them, and makes a copy of it cheap.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{changes, SiteCount};
use crate::callsite::SiteId;

/// Ids per chunk. Sites are numbered in the order they are first seen, so a program's start-up
/// sites fall in chunks of their own, apart from those of its main loop.
const CHUNK_IDS: SiteId = 16;

/// What `SiteList::map_chunks` made of each chunk: by the chunk's address and the caller's flag.
/// The memo also holds each chunk it was given, so that no address in it is reused by another
/// chunk while it lives.
pub(crate) type ChunkMemo = HashMap<(*const SiteCount, bool), (Arc<[SiteCount]>, Arc<[SiteCount]>)>;

/// Call-site counters sorted by id, in chunks of `CHUNK_IDS` consecutive ids (empty chunks left
/// out). Equal lists have equal chunks.
#[derive(Clone, Default, PartialEq, Eq)]
pub(crate) struct SiteList {
    chunks: Vec<Arc<[SiteCount]>>,
    /// Only the sites that changed since the checkpoint before (`changes_since`), as a timeline
    /// file holds them; `overlay_on` makes the whole list again. Set only while a timeline file is
    /// written or read.
    changes_only: bool,
}

fn chunk_of(id: SiteId) -> SiteId {
    id / CHUNK_IDS
}

impl SiteList {
    /// The list of `sites`, in any order.
    pub fn new(mut sites: Vec<SiteCount>) -> SiteList {
        sites.sort_by_key(|s| s.id);
        let mut chunks = Vec::new();
        let mut rest = sites.as_slice();
        while let Some(first) = rest.first() {
            let key = chunk_of(first.id);
            let n = rest.partition_point(|s| chunk_of(s.id) == key);
            chunks.push(Arc::from(&rest[..n]));
            rest = &rest[n..];
        }
        SiteList {
            chunks,
            changes_only: false,
        }
    }

    /// The sites, by id.
    pub fn iter(&self) -> impl Iterator<Item = &SiteCount> + '_ {
        self.chunks.iter().flat_map(|c| c.iter())
    }

    /// The sites, by id, to change: a chunk another list shares is copied first.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut SiteCount> + '_ {
        self.chunks
            .iter_mut()
            .flat_map(|c| Arc::make_mut(c).iter_mut())
    }

    /// Replaces each chunk that equals the same chunk of `earlier` by `earlier`'s, so the two
    /// lists hold it once.
    pub fn share_with(&mut self, earlier: &SiteList) {
        let mut prev = earlier.chunks.iter().peekable();
        for c in &mut self.chunks {
            let key = chunk_of(c[0].id);
            while prev.next_if(|p| chunk_of(p[0].id) < key).is_some() {}
            if let Some(p) = prev.next_if(|p| chunk_of(p[0].id) == key) {
                if p == c {
                    *c = Arc::clone(p);
                }
            }
        }
    }

    /// The sites that this list and `earlier` do not hold in a shared chunk, by id, each with its
    /// entry in `earlier` and in this list (`None` where a list does not hold it). A shared chunk
    /// is the same in both, so this is every site whose counters may differ.
    pub fn unshared_with<'a>(&'a self, earlier: &'a SiteList) -> Vec<Pair<'a>> {
        let mut out = Vec::new();
        for (x, y) in by_chunk(&earlier.chunks, &self.chunks) {
            if let (Some(x), Some(y)) = (x, y) {
                if Arc::ptr_eq(x, y) {
                    continue;
                }
            }
            merge_by_id(
                x.map_or(&[], |c| &c[..]),
                y.map_or(&[], |c| &c[..]),
                &mut out,
            );
        }
        out
    }

    /// The list with each chunk replaced by what `f` makes of it (`None`: the chunk as it is). A
    /// chunk that several lists share is mapped once for all calls given the same `memo` and
    /// `flag`, and the lists made share its replacement.
    pub fn map_chunks(
        &self,
        memo: &mut ChunkMemo,
        flag: bool,
        mut f: impl FnMut(&[SiteCount]) -> Option<Vec<SiteCount>>,
    ) -> SiteList {
        let chunks = self
            .chunks
            .iter()
            .map(|c| {
                let key = (Arc::as_ptr(c) as *const SiteCount, flag);
                let (_, mapped) = memo.entry(key).or_insert_with(|| {
                    let mapped = match f(c) {
                        Some(v) => Arc::from(v),
                        None => Arc::clone(c),
                    };
                    (Arc::clone(c), mapped)
                });
                Arc::clone(mapped)
            })
            .collect();
        SiteList {
            chunks,
            changes_only: self.changes_only,
        }
    }

    /// The sites of this list that are not in `earlier` or differ from their entry there, as a
    /// list of changes (`overlay_on` of it on `earlier` is this list); `None` when `earlier` holds
    /// a site this list does not, which changes cannot say.
    pub fn changes_since(&self, earlier: &SiteList) -> Option<SiteList> {
        let mut changed = Vec::new();
        for (_, before, now) in self.unshared_with(earlier) {
            match (before, now) {
                (Some(_), None) => return None,
                (before, Some(now)) if before != Some(now) => changed.push(now.clone()),
                _ => {}
            }
        }
        Some(SiteList {
            changes_only: true,
            ..SiteList::new(changed)
        })
    }

    /// Whether the list holds only the sites that changed since the checkpoint before.
    pub fn is_changes_only(&self) -> bool {
        self.changes_only
    }

    /// The whole list of which this one holds the changes since `earlier` (this list itself
    /// when it is whole): `earlier`'s sites, each replaced by its entry here if it has one, and
    /// the sites new here. The chunks without a change are `earlier`'s own.
    pub fn overlay_on(self, earlier: &SiteList) -> SiteList {
        if !self.changes_only {
            return self;
        }
        let mut chunks = Vec::with_capacity(earlier.chunks.len().max(self.chunks.len()));
        for pair in by_chunk(&earlier.chunks, self.chunks) {
            match pair {
                (Some(before), None) => chunks.push(Arc::clone(before)),
                (None, Some(changes)) => chunks.push(changes),
                (Some(before), Some(changes)) => {
                    let mut pairs = Vec::new();
                    merge_by_id(before, &changes, &mut pairs);
                    let merged: Vec<SiteCount> = pairs
                        .into_iter()
                        .filter_map(|(_, before, change)| change.or(before).cloned())
                        .collect();
                    chunks.push(Arc::from(merged));
                }
                (None, None) => {}
            }
        }
        SiteList {
            chunks,
            changes_only: false,
        }
    }

    /// How many chunks this list holds that `other` holds too (the same memory): for tests.
    #[cfg(test)]
    pub fn shared_chunks(&self, other: &SiteList) -> usize {
        self.chunks
            .iter()
            .filter(|c| other.chunks.iter().any(|o| Arc::ptr_eq(c, o)))
            .count()
    }
}

/// The chunks of two lists (both by id) paired by the ids they hold: each chunk of one list with
/// the other's chunk of the same ids, if it has one.
fn by_chunk<X: AsRef<[SiteCount]>, Y: AsRef<[SiteCount]>>(
    a: impl IntoIterator<Item = X>,
    b: impl IntoIterator<Item = Y>,
) -> impl Iterator<Item = (Option<X>, Option<Y>)> {
    let (mut a, mut b) = (a.into_iter().peekable(), b.into_iter().peekable());
    let key = |c: &[SiteCount]| chunk_of(c[0].id);
    std::iter::from_fn(move || {
        let order = match (a.peek(), b.peek()) {
            (None, None) => return None,
            (Some(x), Some(y)) => key(x.as_ref()).cmp(&key(y.as_ref())),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
        };
        Some(match order {
            Ordering::Less => (a.next(), None),
            Ordering::Greater => (None, b.next()),
            Ordering::Equal => (a.next(), b.next()),
        })
    })
}

/// A site's entries in two lists (see `SiteList::unshared_with`).
pub(crate) type Pair<'a> = (SiteId, Option<&'a SiteCount>, Option<&'a SiteCount>);

/// Appends the entries of `a` and `b`, both sorted by id, to `out` as pairs by id.
fn merge_by_id<'a>(a: &'a [SiteCount], b: &'a [SiteCount], out: &mut Vec<Pair<'a>>) {
    let (mut i, mut j) = (0, 0);
    loop {
        match (a.get(i), b.get(j)) {
            (None, None) => return,
            (Some(x), Some(y)) if x.id == y.id => {
                out.push((x.id, Some(x), Some(y)));
                i += 1;
                j += 1;
            }
            (Some(x), Some(y)) if x.id < y.id => {
                out.push((x.id, Some(x), None));
                i += 1;
            }
            (Some(x), None) => {
                out.push((x.id, Some(x), None));
                i += 1;
            }
            (_, Some(y)) => {
                out.push((y.id, None, Some(y)));
                j += 1;
            }
        }
    }
}

impl<'a> IntoIterator for &'a SiteList {
    type Item = &'a SiteCount;
    type IntoIter = std::iter::FlatMap<
        std::slice::Iter<'a, Arc<[SiteCount]>>,
        &'a [SiteCount],
        fn(&'a Arc<[SiteCount]>) -> &'a [SiteCount],
    >;

    fn into_iter(self) -> Self::IntoIter {
        fn entries(c: &Arc<[SiteCount]>) -> &[SiteCount] {
            c
        }
        self.chunks.iter().flat_map(entries as fn(_) -> _)
    }
}

/// A list of the sites, as a `Vec` prints: the chunks are not the contents.
impl fmt::Debug for SiteList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl Serialize for SiteList {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        changes::serialize(serializer, || self.iter(), self.changes_only)
    }
}

impl<'de> Deserialize<'de> for SiteList {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<SiteList, D::Error> {
        let (sites, changes_only) = changes::deserialize(deserializer, "sites")?;
        Ok(SiteList {
            changes_only,
            ..SiteList::new(sites)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(id: SiteId, allocs: u64) -> SiteCount {
        SiteCount::live(id, allocs)
    }

    fn ids(l: &SiteList) -> Vec<SiteId> {
        l.iter().map(|s| s.id).collect()
    }

    #[test]
    fn sites_are_listed_by_id_whatever_order_they_come_in() {
        let l = SiteList::new(vec![site(40, 1), site(3, 1), site(17, 1), site(5, 1)]);
        assert_eq!(ids(&l), [3, 5, 17, 40]);
        assert_eq!((&l).into_iter().count(), 4);
    }

    #[test]
    fn a_chunk_that_did_not_change_is_held_once() {
        let earlier = SiteList::new(vec![site(1, 5), site(2, 5), site(20, 5), site(40, 5)]);
        let mut later = SiteList::new(vec![site(1, 5), site(2, 5), site(20, 6), site(40, 5)]);
        later.share_with(&earlier);
        assert_eq!(later.shared_chunks(&earlier), 2, "ids 1-2 and 40 unchanged");
        assert_eq!(ids(&later), [1, 2, 20, 40]);
        assert_eq!(later.iter().nth(2).map(|s| s.counts.alloc_blocks), Some(6));
    }

    #[test]
    fn a_chunk_with_a_new_site_is_not_shared() {
        let earlier = SiteList::new(vec![site(1, 5)]);
        let mut later = SiteList::new(vec![site(1, 5), site(2, 1), site(70, 1)]);
        later.share_with(&earlier);
        assert_eq!(later.shared_chunks(&earlier), 0);
        assert_eq!(ids(&later), [1, 2, 70]);
    }

    #[test]
    fn changing_a_shared_chunk_leaves_the_other_list_as_it_was() {
        let earlier = SiteList::new(vec![site(1, 5), site(2, 5)]);
        let mut later = earlier.clone();
        later.share_with(&earlier);
        for s in later.iter_mut() {
            s.counts.alloc_blocks += 1;
        }
        assert_eq!(
            earlier.iter().map(|s| s.counts.alloc_blocks).sum::<u64>(),
            10
        );
        assert_eq!(later.iter().map(|s| s.counts.alloc_blocks).sum::<u64>(), 12);
    }

    #[test]
    fn the_unshared_sites_are_those_outside_shared_chunks_paired_by_id() {
        let earlier = SiteList::new(vec![site(1, 5), site(20, 5), site(21, 5), site(40, 5)]);
        let mut later = SiteList::new(vec![
            site(1, 5),
            site(20, 6),
            site(22, 1),
            site(40, 5),
            site(70, 1),
        ]);
        later.share_with(&earlier);
        let pairs: Vec<(SiteId, Option<u64>, Option<u64>)> = later
            .unshared_with(&earlier)
            .into_iter()
            .map(|(id, a, b)| {
                let allocs = |s: Option<&SiteCount>| s.map(|s| s.counts.alloc_blocks);
                (id, allocs(a), allocs(b))
            })
            .collect();
        assert_eq!(
            pairs,
            [
                (20, Some(5), Some(6)),
                (21, Some(5), None),
                (22, None, Some(1)),
                (70, None, Some(1)),
            ]
        );
    }

    #[test]
    fn the_changes_since_an_earlier_list_are_the_sites_new_or_different() {
        let earlier = SiteList::new(vec![site(1, 5), site(20, 5), site(21, 5)]);
        let later = SiteList::new(vec![site(1, 5), site(20, 6), site(21, 5), site(70, 1)]);
        let changes = later.changes_since(&earlier).expect("no site dropped");
        assert!(changes.is_changes_only());
        assert_eq!(ids(&changes), [20, 70]);
        assert_eq!(changes.overlay_on(&earlier), later);
    }

    #[test]
    fn changes_cannot_say_that_a_site_was_dropped() {
        let earlier = SiteList::new(vec![site(1, 5), site(2, 5)]);
        let later = SiteList::new(vec![site(1, 6)]);
        assert_eq!(later.changes_since(&earlier), None);
    }

    #[test]
    fn an_overlay_keeps_the_earlier_chunks_without_a_change() {
        let earlier = SiteList::new(vec![site(1, 5), site(20, 5)]);
        let later = SiteList::new(vec![site(1, 5), site(20, 6)]);
        let whole = later.changes_since(&earlier).unwrap().overlay_on(&earlier);
        assert_eq!(whole.shared_chunks(&earlier), 1);
        assert!(!whole.is_changes_only());
    }

    #[test]
    fn a_list_of_changes_reads_back_as_one() {
        let earlier = SiteList::new(vec![site(1, 5)]);
        let changes = SiteList::new(vec![site(1, 6), site(2, 1)])
            .changes_since(&earlier)
            .unwrap();
        let text = serde_json::to_string(&changes).expect("serializes");
        assert!(text.starts_with(r#"{"changed":["#), "{text}");
        let back: SiteList = serde_json::from_str(&text).expect("reads back");
        assert_eq!(back, changes);
    }

    #[test]
    fn a_list_prints_as_the_list_of_its_sites() {
        let sites = vec![site(1, 1), site(40, 2)];
        let l = SiteList::new(sites.clone());
        assert_eq!(format!("{l:?}"), format!("{sites:?}"));
    }

    #[test]
    fn a_list_reads_back_as_it_was_written() {
        let l = SiteList::new(vec![site(9, 2), site(33, 3)]);
        let text = serde_json::to_string(&l).expect("serializes");
        let back: SiteList = serde_json::from_str(&text).expect("reads back");
        assert_eq!(back, l);
    }
}
