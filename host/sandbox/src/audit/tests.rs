//! The audit's verdicts, import by import.

use super::*;
use hcp_contracts::manifest::{Access, FsGrant, NetGrant, NetHost};

fn refused(name: &str, grants: &Grants) -> bool {
    matches!(classify(name, grants), ImportVerdict::Refused { .. })
}

#[test]
fn nothing_but_the_basics_without_grants() {
    let none = Grants::default();
    for ok in [
        "wasi:io/streams@0.2.6",
        "wasi:cli/stdout@0.2.12",
        "wasi:clocks/monotonic-clock@0.2.0",
        "hcp:capability/log@1.0.0",
        "hcp:capability/artifacts@1.0.0",
    ] {
        assert!(!refused(ok, &none), "{ok} refused");
    }
    for (inert, by) in [
        ("wasi:filesystem/types@0.2.6", GrantedBy::FilesystemInert),
        ("wasi:filesystem/preopens@0.2.0", GrantedBy::FilesystemInert),
        ("wasi:sockets/network@0.2.6", GrantedBy::NetworkInert),
        (
            "wasi:sockets/instance-network@0.2.6",
            GrantedBy::NetworkInert,
        ),
        ("wasi:sockets/tcp@0.2.6", GrantedBy::NetworkInert),
        (
            "wasi:sockets/tcp-create-socket@0.2.9",
            GrantedBy::NetworkInert,
        ),
        ("wasi:sockets/udp@0.2.6", GrantedBy::NetworkInert),
        (
            "wasi:sockets/udp-create-socket@0.2.6",
            GrantedBy::NetworkInert,
        ),
        ("wasi:sockets/ip-name-lookup@0.2.6", GrantedBy::NetworkInert),
    ] {
        assert_eq!(
            classify(inert, &none),
            ImportVerdict::Allowed { granted_by: by },
            "{inert}"
        );
        assert!(by.is_inert() && by.describe().starts_with("linked, inert: "));
    }
    for bad in [
        "wasi:http/outgoing-handler@0.2.6",
        "wasi:http/types@0.2.6",
        "wasi:filesystem/other@0.2.6",
        "wasi:sockets/raw@0.2.6",
        "wasi:filesystem/types@0.3.0",
        "wasi:sockets/tcp@1.2.0",
        "hcp:capability/instrument@1.0.0",
        "hcp:capability/hid@1.0.0",
        "hcp:capability/log@2.0.0",
        "hcp:capability/log@1.1.0",
        "wasi:cli/stdout@0.3.0",
        "evil:backdoor/shell@1.0.0",
        "wasi:cli/stdout",
        "plain-function@1.0.0",
    ] {
        assert!(refused(bad, &none), "{bad} allowed");
    }
}

#[test]
fn each_grant_opens_exactly_its_interfaces() {
    let fs = Grants {
        filesystem: vec![FsGrant {
            host_path: "/tmp".into(),
            guest_path: "/tmp".into(),
            access: Access::ReadOnly,
            identity: None,
        }],
        ..Grants::default()
    };
    assert_eq!(
        classify("wasi:filesystem/types@0.2.6", &fs),
        ImportVerdict::Allowed {
            granted_by: GrantedBy::Filesystem
        }
    );
    assert_eq!(
        classify("wasi:sockets/tcp@0.2.6", &fs),
        ImportVerdict::Allowed {
            granted_by: GrantedBy::NetworkInert
        }
    );
    assert!(refused("wasi:http/types@0.2.6", &fs));

    let ip_only = Grants {
        network: vec![NetGrant {
            host: NetHost::Ip([127, 0, 0, 1].into()),
            port: 80,
            allow_private: false,
        }],
        ..Grants::default()
    };
    assert!(!refused("wasi:sockets/tcp@0.2.6", &ip_only));
    assert!(!refused("wasi:http/outgoing-handler@0.2.6", &ip_only));
    assert_eq!(
        classify("wasi:sockets/ip-name-lookup@0.2.6", &ip_only),
        ImportVerdict::Allowed {
            granted_by: GrantedBy::NameLookupInert
        }
    );
    assert_eq!(
        classify("wasi:sockets/udp@0.2.6", &ip_only),
        ImportVerdict::Allowed {
            granted_by: GrantedBy::NetworkUdpInert
        }
    );
    assert_eq!(
        classify("wasi:filesystem/types@0.2.6", &ip_only),
        ImportVerdict::Allowed {
            granted_by: GrantedBy::FilesystemInert
        }
    );

    let named = Grants {
        network: vec![NetGrant {
            host: NetHost::Name("example.com".into()),
            port: 443,
            allow_private: false,
        }],
        ..Grants::default()
    };
    assert!(!refused("wasi:sockets/ip-name-lookup@0.2.6", &named));

    let env = Grants {
        env: vec!["LANG".into()],
        ..Grants::default()
    };
    assert_eq!(
        classify("wasi:cli/environment@0.2.6", &env),
        ImportVerdict::Allowed {
            granted_by: GrantedBy::Env
        }
    );
    assert_eq!(
        classify("wasi:cli/environment@0.2.6", &Grants::default()),
        ImportVerdict::Allowed {
            granted_by: GrantedBy::AlwaysEmptyEnv
        }
    );
}
