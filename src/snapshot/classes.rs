//! `ClassList`: a snapshot's size-class counters, which a timeline file writes, at a checkpoint of
//! the same run as the one before it, as the classes that changed since.
//!
//! Of the 35 classes a program uses, a step changes a few: a user trial's checkpoint per frame
//! changed 11, and the whole table at every checkpoint took 62.7 MB of its 105 MB file. In memory
//! the table is shared: a copy of a snapshot (a `timeline()`) counts a reference, and a checkpoint
//! whose classes did not change (an idle step) holds the one before's.

use std::ops::Deref;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{changes, ClassCount};

/// Size-class counters, by size, smallest first, in memory always whole.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ClassList {
    classes: Arc<[ClassCount]>,
    /// Only the classes that changed since the checkpoint before (`changes_since`), as a
    /// timeline file holds them; `overlay_on` makes the whole list again. Set only while a
    /// timeline file is written or read.
    changes_only: bool,
}

/// By size: a list read from a file in another order reads as a snapshot holds it, so that it is
/// written back the same (a review: a file's `[32, 16]` read back, written and read again, was
/// `[16, 32]`).
impl From<Vec<ClassCount>> for ClassList {
    fn from(mut classes: Vec<ClassCount>) -> ClassList {
        classes.sort_by_key(|c| c.size);
        ClassList {
            classes: classes.into(),
            changes_only: false,
        }
    }
}

impl Default for ClassList {
    fn default() -> ClassList {
        ClassList::from(Vec::new())
    }
}

impl Deref for ClassList {
    type Target = [ClassCount];
    fn deref(&self) -> &[ClassCount] {
        &self.classes
    }
}

impl ClassList {
    /// The classes whose counters differ from `earlier`'s or that `earlier` has not, as a list of
    /// changes; `None` when a class of `earlier` is gone (counters never fall to zero within a
    /// run, so only a list from elsewhere), which is then written whole.
    pub fn changes_since(&self, earlier: &ClassList) -> Option<ClassList> {
        let gone = earlier
            .iter()
            .any(|e| !self.iter().any(|c| c.size == e.size));
        if gone {
            return None;
        }
        let changed: Vec<ClassCount> = self
            .iter()
            .filter(|c| !earlier.contains(c))
            .copied()
            .collect();
        Some(ClassList {
            changes_only: true,
            ..ClassList::from(changed)
        })
    }

    /// Holds `earlier`'s table instead of its own when the two are equal, so the two lists hold
    /// it once.
    pub fn share_with(&mut self, earlier: &ClassList) {
        if self.classes == earlier.classes {
            self.classes = Arc::clone(&earlier.classes);
        }
    }

    /// Whether this list and `other` hold the same table in memory: for tests.
    #[cfg(test)]
    pub fn is_shared_with(&self, other: &ClassList) -> bool {
        Arc::ptr_eq(&self.classes, &other.classes)
    }

    /// Whether the list holds only the classes that changed since the checkpoint before.
    pub fn is_changes_only(&self) -> bool {
        self.changes_only
    }

    /// The whole list of which this one holds the changes since `earlier` (this list itself when
    /// it is whole): `earlier`'s classes, each replaced by its entry here if it has one, and the
    /// classes new here, by size.
    pub fn overlay_on(self, earlier: &ClassList) -> ClassList {
        if !self.changes_only {
            return self;
        }
        let changed = self.classes;
        let classes: Vec<ClassCount> = earlier
            .iter()
            .filter(|e| !changed.iter().any(|c| c.size == e.size))
            .copied()
            .chain(changed.iter().copied())
            .collect();
        ClassList::from(classes)
    }
}

impl Serialize for ClassList {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        changes::serialize(serializer, || self.iter(), self.changes_only)
    }
}

impl<'de> Deserialize<'de> for ClassList {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<ClassList, D::Error> {
        let (classes, changes_only) = changes::deserialize(deserializer, "size classes")?;
        Ok(ClassList {
            changes_only,
            ..ClassList::from(classes)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Counts;

    fn class(size: u64, allocs: u64) -> ClassCount {
        ClassCount {
            size,
            counts: Counts {
                alloc_blocks: allocs,
                alloc_bytes: allocs * size,
                free_blocks: 0,
                free_bytes: 0,
            },
        }
    }

    #[test]
    fn the_changes_since_a_list_are_the_classes_that_changed_or_are_new() {
        let before = ClassList::from(vec![class(16, 1), class(32, 5), class(64, 2)]);
        let after = ClassList::from(vec![class(16, 1), class(32, 6), class(48, 1), class(64, 2)]);
        let changes = after.changes_since(&before).unwrap();
        assert!(changes.is_changes_only());
        assert_eq!(*changes, [class(32, 6), class(48, 1)]);
        assert_eq!(changes.overlay_on(&before), after);
    }

    #[test]
    fn a_list_that_lost_a_class_is_written_whole() {
        let before = ClassList::from(vec![class(16, 1), class(32, 5)]);
        let after = ClassList::from(vec![class(32, 5)]);
        assert_eq!(after.changes_since(&before), None);
    }

    #[test]
    fn a_table_that_did_not_change_is_held_once() {
        let before = ClassList::from(vec![class(16, 1), class(32, 5)]);
        let mut same = ClassList::from(vec![class(16, 1), class(32, 5)]);
        let mut changed = ClassList::from(vec![class(16, 2), class(32, 5)]);
        same.share_with(&before);
        changed.share_with(&before);
        assert!(same.is_shared_with(&before));
        assert!(!changed.is_shared_with(&before));
        assert_eq!(*changed, [class(16, 2), class(32, 5)]);
    }

    #[test]
    fn a_whole_list_overlaid_on_another_is_itself() {
        let before = ClassList::from(vec![class(16, 1)]);
        let after = ClassList::from(vec![class(32, 1)]);
        assert_eq!(after.clone().overlay_on(&before), after);
    }
}
