//! The limit set of a task, written once: each limit's name, what it
//! bounds, the host's default and the most a host installs unless its
//! `install.json` says otherwise.
//!
//! [`limit_set!`](crate::limit_set) hands the set to a macro of the
//! caller's, which builds the types the set has a field in: here the
//! manifest's [`LimitsDoc`] (as written) and [`Limits`] (resolved), in
//! `hcp-policy` the install bounds. Everything else iterates
//! [`Limits::each`] or [`LimitsDoc::each`], so that a new limit is one
//! line of [`limit_set!`](crate::limit_set) (and its JSON Schemas).

/// Calls `$callback!` with the limit set, one
/// `name: "what it bounds", default, built-in maximum;` line per limit,
/// in the order reports list them.
#[macro_export]
macro_rules! limit_set {
    ($callback:ident) => {
        $callback! {
            memory_bytes: "Linear memory of all memories together, bytes.", 128 << 20, 1 << 30;
            table_elements: "Elements of any one table.", 20_000, 1_000_000;
            instances: "Core instances.", 32, 256;
            output_bytes: "Bytes of the `outputs` JSON.", 1 << 20, 16 << 20;
            log_bytes: "Bytes of the task log (log lines, stdout, stderr).", 64 << 10, 16 << 20;
            artifacts: "Number of artifacts.", 32, 1_024;
            artifact_bytes: "Bytes of all artifacts.", 64 << 20, 1 << 30;
            checkpoints: "Number of checkpoints.", 32, 1_024;
            checkpoint_bytes: "Bytes of one checkpoint.", 1 << 20, 64 << 20;
            kv_keys: "Keys in one `wasi:keyvalue` bucket.", 1_000, 1_000_000;
            kv_value_bytes: "Bytes of one `wasi:keyvalue` value.", 64 << 10, 16 << 20;
            kv_bytes: "Bytes of one `wasi:keyvalue` bucket (keys and values).", 4 << 20, 1 << 30;
        }
    };
}

macro_rules! manifest_limits {
    ($($name:ident: $about:literal, $default:expr, $max:expr;)*) => {
        /// Limits as written; absent ones take the host's defaults.
        #[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct LimitsDoc {
            $(
                #[doc = $about]
                #[serde(default, skip_serializing_if = "Option::is_none")]
                pub $name: Option<u64>,
            )*
        }

        /// Limits of one task, every one set.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct Limits {
            $(#[doc = $about] pub $name: u64,)*
        }

        impl Limits {
            /// The host's defaults.
            pub const DEFAULT: Limits = Limits { $($name: $default,)* };

            /// The most a host installs where its `install.json` sets no
            /// bound.
            pub const BUILT_IN_MAX: Limits = Limits { $($name: $max,)* };

            /// The names of the limits, in the order of [`Limits::each`].
            pub const NAMES: &[&str] = &[$(stringify!($name),)*];

            /// Every limit with its name, in the set's order.
            pub fn each(&self) -> impl Iterator<Item = (&'static str, u64)> {
                [$((stringify!($name), self.$name),)*].into_iter()
            }

            pub(super) fn from_doc(doc: &LimitsDoc) -> Self {
                let d = Self::DEFAULT;
                Self { $($name: doc.$name.unwrap_or(d.$name),)* }
            }
        }

        impl LimitsDoc {
            /// Every limit with its name and the value written, if any, in
            /// the set's order.
            pub fn each(&self) -> impl Iterator<Item = (&'static str, Option<u64>)> {
                [$((stringify!($name), self.$name),)*].into_iter()
            }
        }
    };
}

limit_set!(manifest_limits);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_lists_every_limit_in_order() {
        let names: Vec<&str> = Limits::DEFAULT.each().map(|(n, _)| n).collect();
        assert_eq!(names, Limits::NAMES);
        let doc = LimitsDoc {
            log_bytes: Some(7),
            ..LimitsDoc::default()
        };
        let written: Vec<_> = doc.each().filter_map(|(n, v)| Some((n, v?))).collect();
        assert_eq!(written, [("log_bytes", 7)]);
        assert_eq!(Limits::from_doc(&doc).log_bytes, 7);
        assert_eq!(Limits::from_doc(&doc).memory_bytes, 128 << 20);
    }

    #[test]
    fn every_default_is_within_its_built_in_maximum() {
        for ((name, default), (_, max)) in Limits::DEFAULT.each().zip(Limits::BUILT_IN_MAX.each()) {
            assert!(default <= max, "{name}");
        }
    }

    /// The capability schema names exactly the limit set.
    #[test]
    fn the_schemas_list_the_limit_set() {
        let schema: serde_json::Value =
            serde_json::from_str(include_str!("../../../../schemas/capability.schema.json"))
                .expect("schema");
        let props = schema
            .pointer("/properties/limits/properties")
            .or_else(|| schema.pointer("/$defs/limits/properties"))
            .and_then(|p| p.as_object())
            .expect("limits properties");
        let mut listed: Vec<&str> = props.keys().map(String::as_str).collect();
        let mut set = Limits::NAMES.to_vec();
        listed.sort_unstable();
        set.sort_unstable();
        assert_eq!(listed, set);
    }
}
