//! How a timeline file writes a checkpoint's list of counters: the whole list as `[...]`, or only
//! the entries that changed since the checkpoint before as `{"changed": [...]}`. Used by the
//! call sites (`SiteList`) and the size classes (`ClassList`).

use std::fmt;
use std::marker::PhantomData;

use serde::de::value::SeqAccessDeserializer;
use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The key under which a list of changes holds its entries: `{"changed": [...]}`, where a whole
/// list is the bare `[...]`.
const CHANGED: &str = "changed";

/// Writes the entries `entries()` gives as a whole list, or as a list of changes when
/// `changes_only`.
pub(super) fn serialize<S, T, I, F>(
    serializer: S,
    entries: F,
    changes_only: bool,
) -> Result<S::Ok, S::Error>
where
    S: Serializer,
    T: Serialize,
    I: Iterator<Item = T>,
    F: Fn() -> I,
{
    struct Entries<F>(F);
    impl<T: Serialize, I: Iterator<Item = T>, F: Fn() -> I> Serialize for Entries<F> {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            serializer.collect_seq((self.0)())
        }
    }
    if changes_only {
        let mut map = serializer.serialize_map(Some(1))?;
        map.serialize_entry(CHANGED, &Entries(entries))?;
        map.end()
    } else {
        serializer.collect_seq(entries())
    }
}

/// Reads a whole list or a list of changes (`what` names its entries in the error of anything
/// else); returns the entries and whether they are only the changes.
pub(super) fn deserialize<'de, D, T>(
    deserializer: D,
    what: &'static str,
) -> Result<(Vec<T>, bool), D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct List<T> {
        what: &'static str,
        entries: PhantomData<T>,
    }
    impl<'de, T: Deserialize<'de>> Visitor<'de> for List<T> {
        type Value = (Vec<T>, bool);
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(
                f,
                "a list of {0}, or {{\"changed\": a list of {0}}}",
                self.what
            )
        }
        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
            Vec::<T>::deserialize(SeqAccessDeserializer::new(seq)).map(|all| (all, false))
        }
        fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
            let mut changed: Option<Vec<T>> = None;
            while let Some(key) = map.next_key::<String>()? {
                if key != CHANGED {
                    return Err(de::Error::unknown_field(&key, &[CHANGED]));
                }
                if changed.replace(map.next_value()?).is_some() {
                    return Err(de::Error::duplicate_field(CHANGED));
                }
            }
            let changed = changed.ok_or_else(|| de::Error::missing_field(CHANGED))?;
            Ok((changed, true))
        }
    }
    deserializer.deserialize_any(List {
        what,
        entries: PhantomData,
    })
}
