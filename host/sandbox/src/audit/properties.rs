//! Properties of the audit over any import name.

use super::*;
use proptest::prelude::*;

proptest! {
    /// Without grants, nothing outside the always-granted basics is ever
    /// allowed, whatever the name, except `wasi:filesystem` and
    /// `wasi:sockets` linked inert.
    #[test]
    fn no_grant_no_surface(package in "[a-z:]{1,12}", interface in "[a-z-]{1,16}", version in "[0-9]\\.[0-9]\\.[0-9]") {
        let name = format!("{package}/{interface}@{version}");
        if let ImportVerdict::Allowed { granted_by } = classify(&name, &Grants::default()) {
            let inert = granted_by.is_inert()
                && matches!(package.as_str(), "wasi:filesystem" | "wasi:sockets");
            prop_assert!(inert || matches!(granted_by, GrantedBy::Always | GrantedBy::AlwaysEmptyEnv), "{name}");
        }
    }

    /// Arbitrary text never panics the classifier.
    #[test]
    fn classify_never_panics(name in "\\PC{0,60}") {
        let _ = classify(&name, &Grants::default());
    }
}
