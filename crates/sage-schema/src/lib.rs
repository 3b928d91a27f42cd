//! The published formats as types of their own (`docs/architecture.md`): a format's records
//! are declared next to the internal values they are made from, with explicit conversions,
//! so an internal rename cannot change what a file says. This crate holds the machinery every
//! format's `schema` module shares: [`Conv`] (a conversion, element by element through
//! `Vec`, `Option` and maps) and four macros.
//!
//! - [`mirror!`] and [`words!`]: a record or word list with conversions both ways, for a
//!   format sage reads back (`sage.results/1`, `sage.screen/1`, `sage.confirm-key/1`, the
//!   annotation key); [`from_both!`] adds `From` both ways for the records other code holds.
//! - [`mirror_out!`] and [`words_out!`]: `From` the internal value only, for a format nothing
//!   reads back (`sage.reliability/1`, `sage.replay/1`); a field the format does not publish
//!   is named in `not published { .. }`, so a new internal field is a compile error until it
//!   is published or named there.
//!
//! The macros derive serde's traits in the caller's crate, which depends on serde itself.

#![warn(missing_docs)]

use std::collections::BTreeMap;

/// A conversion between a published record and the value it is made from (or back).
pub trait Conv<T> {
    /// The value as `T`.
    fn conv(self) -> T;
}

macro_rules! as_is {
    ($($t:ty),*) => {$(
        impl Conv<$t> for $t {
            fn conv(self) -> $t {
                self
            }
        }
    )*};
}
as_is!(
    &'static str,
    String,
    bool,
    i32,
    u8,
    u32,
    u64,
    usize,
    f64,
    [usize; 2],
    (f64, f64),
    i64,
    (String, usize)
);

impl<A: Conv<B>, B> Conv<Vec<B>> for Vec<A> {
    fn conv(self) -> Vec<B> {
        self.into_iter().map(Conv::conv).collect()
    }
}

impl<A: Conv<B>, B> Conv<Option<B>> for Option<A> {
    fn conv(self) -> Option<B> {
        self.map(Conv::conv)
    }
}

impl<K: Ord, A: Conv<B>, B> Conv<BTreeMap<K, B>> for BTreeMap<K, A> {
    fn conv(self) -> BTreeMap<K, B> {
        self.into_iter().map(|(k, v)| (k, v.conv())).collect()
    }
}

/// A published record with the fields of an internal struct, and the conversions both ways.
#[macro_export]
macro_rules! mirror {
    ($(#[$m:meta])* pub struct $name:ident = $internal:ty {
        $( $(#[$fm:meta])* $f:ident : $t:ty ),* $(,)?
    }) => {
        #[derive(Debug, Clone, PartialEq, ::serde::Serialize, ::serde::Deserialize)]
        $(#[$m])*
        pub struct $name {
            $( $(#[$fm])* pub $f: $t ),*
        }
        impl $crate::Conv<$name> for $internal {
            fn conv(self) -> $name {
                $name { $( $f: $crate::Conv::conv(self.$f) ),* }
            }
        }
        impl $crate::Conv<$internal> for $name {
            fn conv(self) -> $internal {
                type Internal = $internal;
                Internal { $( $f: $crate::Conv::conv(self.$f) ),* }
            }
        }
    };
}

/// A published word list (a unit enum) and the conversions both ways.
#[macro_export]
macro_rules! words {
    ($(#[$m:meta])* pub enum $name:ident = $internal:ty { $($v:ident),* $(,)? }) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, ::serde::Serialize, ::serde::Deserialize)]
        $(#[$m])*
        pub enum $name { $($v),* }
        impl $crate::Conv<$name> for $internal {
            fn conv(self) -> $name {
                type Internal = $internal;
                match self { $( Internal::$v => $name::$v ),* }
            }
        }
        impl $crate::Conv<$internal> for $name {
            fn conv(self) -> $internal {
                type Internal = $internal;
                match self { $( $name::$v => Internal::$v ),* }
            }
        }
    };
}

/// `From` both ways for the records other code holds (a type that serializes through its
/// record with `#[serde(into = .., from = ..)]`).
#[macro_export]
macro_rules! from_both {
    ($($name:ident = $internal:ty;)*) => {$(
        impl From<$internal> for $name {
            fn from(v: $internal) -> $name {
                $crate::Conv::conv(v)
            }
        }
        impl From<$name> for $internal {
            fn from(v: $name) -> $internal {
                $crate::Conv::conv(v)
            }
        }
    )*};
}

/// A published record with the fields of an internal struct, and `From` the internal value
/// (every field taken apart: one the record leaves out is named in `not published`).
#[macro_export]
macro_rules! mirror_out {
    ($(#[$m:meta])* pub struct $name:ident = $internal:ty {
        $( $(#[$fm:meta])* $f:ident : $t:ty ),* $(,)?
    } $(not published { $($skip:ident),* })?) => {
        #[derive(Debug, Clone, PartialEq, ::serde::Serialize)]
        $(#[$m])*
        pub struct $name {
            $( $(#[$fm])* pub $f: $t ),*
        }
        impl From<$internal> for $name {
            fn from(v: $internal) -> $name {
                type Internal = $internal;
                let Internal { $( $f, )* $($( $skip: _, )*)? } = v;
                $name { $( $f: $crate::Conv::conv($f) ),* }
            }
        }
        impl $crate::Conv<$name> for $internal {
            fn conv(self) -> $name {
                self.into()
            }
        }
    };
}

/// A published word list (a unit enum) and `From` the internal one.
#[macro_export]
macro_rules! words_out {
    ($(#[$m:meta])* pub enum $name:ident = $internal:ty { $($v:ident),* $(,)? }) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, ::serde::Serialize)]
        $(#[$m])*
        pub enum $name { $($v),* }
        impl From<$internal> for $name {
            fn from(v: $internal) -> $name {
                type Internal = $internal;
                match v { $( Internal::$v => $name::$v ),* }
            }
        }
        impl $crate::Conv<$name> for $internal {
            fn conv(self) -> $name {
                self.into()
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::Conv;

    mod internal {
        #[derive(Debug, Clone, PartialEq)]
        pub struct Row {
            pub name: String,
            pub counts: Vec<usize>,
            pub kind: Kind,
            pub secret: u8,
        }
        #[derive(Debug, Clone, Copy, PartialEq)]
        pub enum Kind {
            Plain,
            Fancy,
        }
    }

    mod both {
        crate::mirror! {
            pub struct Row = super::internal::Row {
                name: String,
                counts: Vec<usize>,
                kind: Kind,
                #[serde(rename = "s")]
                secret: u8,
            }
        }
        crate::words! {
            #[serde(rename_all = "snake_case")]
            pub enum Kind = super::internal::Kind { Plain, Fancy }
        }
    }

    mod out {
        crate::mirror_out! {
            pub struct Row = super::internal::Row {
                name: String,
                kind: Kind,
            } not published { counts, secret }
        }
        crate::words_out! {
            pub enum Kind = super::internal::Kind { Plain, Fancy }
        }
    }

    fn row() -> internal::Row {
        internal::Row {
            name: "a".into(),
            counts: vec![1, 2],
            kind: internal::Kind::Fancy,
            secret: 7,
        }
    }

    #[test]
    fn a_mirrored_record_publishes_its_fields_and_converts_back() {
        let published: both::Row = row().conv();
        let text = serde_json::to_string(&published).unwrap();
        assert_eq!(text, r#"{"name":"a","counts":[1,2],"kind":"fancy","s":7}"#);
        let read: both::Row = serde_json::from_str(&text).unwrap();
        let back: internal::Row = read.conv();
        assert_eq!(back, row());
    }

    #[test]
    fn a_record_out_leaves_out_what_is_not_published() {
        let published = out::Row::from(row());
        assert_eq!(
            serde_json::to_string(&published).unwrap(),
            r#"{"name":"a","kind":"Fancy"}"#
        );
    }
}
