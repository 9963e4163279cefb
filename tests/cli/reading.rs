//! Commands that only read (`hcp review`, `hcp surface`) run anywhere: in
//! an empty directory, without a data directory or a policy set, they
//! write nothing there (no `./.hcp`), and the review says which policy set
//! it read and who may call the capability under it.

use super::{code, stderr, stdout};
use hcp_tests::REPO_ROOT;
use std::path::Path;
use std::process::{Command, Output};

/// `hcp args` in `dir`, with none of the variables that name a data
/// directory, a cache or a policy set.
fn bare_hcp(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hcp"))
        .args(args)
        .current_dir(dir)
        .env_remove("HCP_DATA_DIR")
        .env_remove("HCP_CACHE_DIR")
        .env_remove("HCP_POLICIES")
        .output()
        .expect("run hcp")
}

fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn review_and_surface_run_in_an_empty_directory_and_write_nothing_there() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let bundles = scratch.path().join("bundles");
    let here = scratch.path().join("here");
    std::fs::create_dir_all(&bundles).expect("mkdir");
    std::fs::create_dir_all(&here).expect("mkdir");
    let bundle = bundles.join("cvd.hcpb");
    let bundle = bundle.to_str().expect("utf8");
    let plugin = Path::new(REPO_ROOT).join("plugins/cvd-material-synthesis");
    let out = bare_hcp(
        &here,
        &[
            "bundle",
            "pack",
            plugin.to_str().expect("utf8"),
            "-o",
            bundle,
        ],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));

    // The review, with no data directory and no policy set anywhere: the
    // shipped set, said so; who may call, with ceilings and budgets.
    let out = bare_hcp(&here, &["review", bundle]);
    let text = stdout(&out);
    assert!(
        text.contains(
            "who may call\n  policy set  the policy set shipped with hcp (no --policies, no \
             ./policies, none in the data directory)\n  approval    asked for tasks assessed R3 \
             or above"
        ),
        "{text}\n{}",
        stderr(&out)
    );
    assert!(
        text.contains(
            "  operator-lab-01    operator (listed by name), risk up to R4, data up to T4; per task \
             1000000 host calls, 1073741824 bytes, 32 artifacts; 4 sessions of the caller, 1 of \
             the capability at once\n"
        ),
        "{text}"
    );
    assert!(
        stderr(&out).contains("note: no data directory at "),
        "{}",
        stderr(&out)
    );
    // A given policy set is named as given.
    let policies = Path::new(REPO_ROOT).join("policies");
    let out = bare_hcp(
        &here,
        &[
            "review",
            "--json",
            "--policies",
            policies.to_str().expect("utf8"),
            bundle,
        ],
    );
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("json");
    assert_eq!(
        json["callers"]["policy_set"],
        format!(
            "{} (given by --policies or HCP_POLICIES)",
            policies.display()
        )
    );
    assert!(
        json["callers"]["callers"]
            .as_array()
            .is_some_and(|c| !c.is_empty())
    );

    // The surface report of the bundle.
    let out = bare_hcp(&here, &["surface", bundle]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));

    assert_eq!(entries(&here), Vec::<String>::new(), "nothing written here");
}
