//! The macros of the mapping-backed adapters (AG2, CAMEL, Deep Agents, claude-stream):
//! one struct shape and one set of `Adapter` items for all of them.

/// A mapping-backed adapter (its field paths in `mappings/NAME.toml`): the struct and its
/// `embedded()` constructor.
macro_rules! mapping_adapter {
    ($(#[$meta:meta])* $ty:ident, $name:literal) => {
        $(#[$meta])*
        pub struct $ty {
            mapping: std::sync::Arc<crate::mapping::Mapping>,
        }

        impl $ty {
            /// The adapter with its embedded mapping file.
            pub fn embedded() -> Self {
                let m = crate::embedded_mapping($name).unwrap_or_else(|e| {
                    // Embedded mappings are checked by unit tests; never reached in a release.
                    panic!("embedded mappings/{}.toml is invalid: {e}", $name)
                });
                $ty {
                    mapping: std::sync::Arc::new(m),
                }
            }
        }
    };
}

/// The `Adapter` items every mapping-backed adapter shares (all but `normalize`): its name,
/// the versions it covers (the mapping's `covers`, the one source), detection by the mapping's
/// `[[detect]]` rules, and the mapping itself, replaceable by `--adapter FILE`.
macro_rules! mapping_adapter_items {
    ($ty:ident, $name:literal) => {
        fn name(&self) -> &'static str {
            $name
        }
        fn versions(&self) -> &str {
            &self.mapping.file.adapter.covers
        }
        fn detect(
            &self,
            shape: &crate::shape::Shape,
            _code_rules: &crate::rules::DetectRules,
        ) -> Option<(u8, String)> {
            // a mapping carries its own rules
            self.mapping.detect(shape)
        }
        fn mapping(&self) -> Option<&crate::mapping::Mapping> {
            Some(&self.mapping)
        }
        fn with_mapping(
            &self,
            mapping: crate::mapping::Mapping,
        ) -> Option<Box<dyn crate::Adapter>> {
            Some(Box::new($ty {
                mapping: std::sync::Arc::new(mapping),
            }))
        }
    };
}
