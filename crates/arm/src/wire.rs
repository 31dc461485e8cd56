//! Wire helpers shared by the models: extensible string enums and case-insensitive string comparison.

/// Defines a string enum whose unknown values are kept in `Other`.
///
/// ARM enums are extensible unions ("modelAsString"), and ARM itself reads enum values
/// case-insensitively (`"incremental"` is accepted for `Incremental`), so known values are matched
/// ignoring ASCII case on input and always written back in their canonical spelling.
macro_rules! extensible_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident => $wire:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
            /// A value this crate does not know, kept as received.
            Other(String),
        }

        impl $name {
            /// The values this crate knows, in their canonical spelling.
            pub const KNOWN: &'static [&'static str] = &[$($wire),+];

            /// Reads a wire value; known values match ignoring ASCII case.
            pub fn parse(value: &str) -> Self {
                $( if value.eq_ignore_ascii_case($wire) { return Self::$variant; } )+
                Self::Other(value.to_owned())
            }

            /// The wire spelling.
            pub fn as_str(&self) -> &str {
                match self {
                    $( Self::$variant => $wire, )+
                    Self::Other(value) => value,
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl From<&str> for $name {
            fn from(value: &str) -> Self {
                Self::parse(value)
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct EnumVisitor;
                impl serde::de::Visitor<'_> for EnumVisitor {
                    type Value = $name;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(f, "a string such as '{}'", $name::KNOWN.join("', '"))
                    }
                    fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<$name, E> {
                        Ok($name::parse(value))
                    }
                }
                deserializer.deserialize_str(EnumVisitor)
            }
        }
    };
}

pub(crate) use extensible_enum;

/// Compares two strings the way ARM compares names and IDs: ignoring case (ASCII fast path, Unicode
/// lowercase otherwise).
pub(crate) fn eq_ignore_case(a: &str, b: &str) -> bool {
    if a.is_ascii() && b.is_ascii() {
        return a.eq_ignore_ascii_case(b);
    }
    a.chars()
        .flat_map(char::to_lowercase)
        .eq(b.chars().flat_map(char::to_lowercase))
}

/// Feeds the lowercase form of `value` to `state`, consistent with [`eq_ignore_case`].
pub(crate) fn hash_ignore_case<H: std::hash::Hasher>(value: &str, state: &mut H) {
    use std::hash::Hash;
    for c in value.chars().flat_map(char::to_lowercase) {
        c.hash(state);
    }
    // A separator keeps ("ab", "c") and ("a", "bc") apart.
    0xffu8.hash(state);
}

#[cfg(test)]
mod tests {
    use super::*;

    extensible_enum! {
        /// Test enum.
        pub enum Color {
            Red => "Red",
            DarkBlue => "DarkBlue",
        }
    }

    #[test]
    fn known_values_match_ignoring_case_and_print_canonically() {
        assert_eq!(Color::parse("darkblue"), Color::DarkBlue);
        assert_eq!(Color::parse("DARKBLUE").to_string(), "DarkBlue");
    }

    #[test]
    fn unknown_values_are_kept_as_received() {
        let c: Color = serde_json::from_str("\"Mauve\"").unwrap();
        assert_eq!(c, Color::Other("Mauve".into()));
        assert_eq!(serde_json::to_string(&c).unwrap(), "\"Mauve\"");
    }

    #[test]
    fn non_strings_are_rejected_with_the_known_values() {
        let err = serde_json::from_str::<Color>("3").unwrap_err().to_string();
        assert!(err.contains("'Red', 'DarkBlue'"), "{err}");
    }

    #[test]
    fn case_insensitive_comparison_covers_unicode() {
        assert!(eq_ignore_case("RG-Ä", "rg-ä"));
        assert!(!eq_ignore_case("rg-a", "rg-ä"));
    }
}
