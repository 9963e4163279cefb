//! The macro that declares [`Op`](crate::interfaces::Op), the operations
//! of host calls, from the list the table of interfaces gives
//! (`crate::interfaces`, beside the rows whose operations they are): an
//! operation is declared where its interface is, and this module is not
//! touched when an interface is added.

macro_rules! ops {
    ($($(#[$doc:meta])* $variant:ident = $name:literal;)*) => {
        /// A kind of host call: `interface.operation`. The names are stable:
        /// receipts record them as `call`. Each is an operation of a row of
        /// [`INTERFACES`](crate::interfaces::INTERFACES) (a test checks both
        /// list the same operations).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
        pub enum Op {
            $($(#[$doc])* #[serde(rename = $name)] $variant,)*
        }

        impl Op {
            /// Every operation.
            pub const ALL: &[Op] = &[$(Op::$variant,)*];

            /// The stable name, e.g. `fs.open`.
            pub fn name(self) -> &'static str {
                match self { $(Op::$variant => $name,)* }
            }

            /// The WIT interface the call belongs to, as the table of
            /// interfaces ([`crate::interfaces`]) gives it.
            pub fn interface(self) -> &'static str {
                $crate::interfaces::by_operation(self.name()).map_or("", |(_, o)| o.wit)
            }

            /// The operation named `name`.
            pub fn from_name(name: &str) -> Option<Op> {
                match name { $($name => Some(Op::$variant),)* _ => None }
            }
        }

        impl std::fmt::Display for Op {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

pub(crate) use ops;
