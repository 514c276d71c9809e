//! `cordon context`: the projection for a directory, its JSON state, and the diff against a
//! saved state, run as the real binary.

mod common;

use common::{stderr, stdout, Tree};

fn context(tree: &Tree, args: &[&str]) -> std::process::Output {
    tree.cordon()
        .arg("context")
        .args(args)
        .env("TZ", "Asia/Tokyo")
        .env("SHELL", "/bin/sh")
        .output()
        .expect("spawn cordon")
}

/// The date the binary reads under the test's TZ (the test process may be in another zone).
fn binary_date(tree: &Tree) -> String {
    let out = context(tree, &["-p", "full-access", "--json"]);
    let state: serde_json::Value = serde_json::from_slice(&out.stdout).expect("state JSON");
    state["current_date"]
        .as_str()
        .expect("current_date")
        .to_owned()
}

#[test]
fn context_cli_prints_the_projection_of_the_profile() {
    let tree = Tree::new();
    let date = binary_date(&tree);
    let out = context(&tree, &["-p", "full-access"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        format!(
            "<environment_context>
  <cwd>{}</cwd>
  <shell>sh</shell>
  <current_date>{date}</current_date>
  <timezone>Asia/Tokyo</timezone>
  <network mode=\"full-access\" />
  <filesystem mode=\"disabled\" />
</environment_context>
",
            tree.cwd.display()
        )
    );
}

#[test]
fn context_cli_json_state_and_diff_since_it() {
    let tree = Tree::new();
    std::fs::create_dir(tree.cwd.join("sub")).expect("mkdir");
    let date = binary_date(&tree);
    let out = context(&tree, &["-p", "read-only", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let cwd = tree.cwd.display();
    assert_eq!(
        stdout(&out),
        format!(
            "{{\"current_date\":\"{date}\",\"environments\":{{\"local\":{{\"cwd\":\"{cwd}\",\"primary\":true,\"shell\":\"sh\",\"status\":\"available\"}}}},\"filesystem\":{{\"hidden\":[],\"mode\":\"managed\",\"read_only\":[],\"readable\":[\"/\"],\"writable\":[]}},\"network\":{{\"allowed_hosts\":[],\"denied_hosts\":[],\"mode\":\"denied\"}},\"timezone\":\"Asia/Tokyo\"}}\n"
        )
    );
    let saved = tree.root.join("state.json");
    std::fs::write(&saved, out.stdout).expect("save state");
    let saved = saved.to_string_lossy().into_owned();

    // Same directory, same profile: nothing to send.
    let same = context(&tree, &["-p", "read-only", "--since", &saved]);
    assert_eq!(same.status.code(), Some(0), "{}", stderr(&same));
    assert_eq!(stdout(&same), "");

    // Another directory: only the environment is restated.
    let moved = context(&tree, &["-p", "read-only", "-C", "sub", "--since", &saved]);
    assert_eq!(moved.status.code(), Some(0), "{}", stderr(&moved));
    assert_eq!(
        stdout(&moved),
        format!("<environment_context>\n  <cwd>{cwd}/sub</cwd>\n  <shell>sh</shell>\n</environment_context>\n")
    );
    let patch = context(
        &tree,
        &["-p", "read-only", "-C", "sub", "--since", &saved, "--json"],
    );
    assert_eq!(
        stdout(&patch),
        format!("{{\"environments\":{{\"local\":{{\"cwd\":\"{cwd}/sub\"}}}}}}\n")
    );
}

#[test]
fn context_cli_bad_saved_state_is_one_line_exit_125() {
    let tree = Tree::new();
    let bad = tree.root.join("bad.json");
    std::fs::write(&bad, "{\"environments\":[]}").expect("write");
    let out = context(&tree, &["--since", &bad.to_string_lossy()]);
    assert_eq!(out.status.code(), Some(125));
    assert_eq!(stdout(&out), "");
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!(
            "cordon: --since {}: not a saved environment context",
            bad.display()
        )),
        "{err}"
    );
}

#[test]
fn context_session_environment_projects_its_cwd_and_policy() {
    use cordon::context::{ContextBuilder, EnvironmentStatus};
    use cordon::exec::Sandbox;
    use cordon::profile::{Overrides, PermissionProfile, ResolveContext};
    use cordon::session::{Session, SessionOptions};

    let tree = Tree::new();
    let overrides = Overrides {
        writable: vec![tree.cwd.to_string_lossy().into_owned()],
        ..Overrides::default()
    };
    let policy = PermissionProfile::load("read-only")
        .expect("preset")
        .with_overrides(&overrides)
        .resolve(&ResolveContext::new(&tree.cwd).with_home(&tree.home))
        .expect("resolve")
        .policy;
    let opts = SessionOptions::new(tree.root.join("sessions"), &tree.cwd)
        .policy(policy)
        .snapshots(false);
    let session = Session::new(Sandbox::without_helper(), opts).expect("session");
    let state = ContextBuilder::new()
        .environment("b-remote", "/srv", EnvironmentStatus::Starting, None)
        .session("a-local", &session, Some("bash"))
        .date("2026-12-01")
        .timezone("Etc/UTC")
        .build();
    assert_eq!(
        state.render(),
        format!(
            "<environment_context>
  <environments>
    <environment id=\"a-local\" primary=\"true\">
      <cwd>{cwd}</cwd>
      <shell>bash</shell>
    </environment>
    <environment id=\"b-remote\" primary=\"false\">
      <cwd>/srv</cwd>
      <status>starting</status>
    </environment>
  </environments>
  <current_date>2026-12-01</current_date>
  <timezone>Etc/UTC</timezone>
  <network mode=\"denied\" />
  <filesystem mode=\"managed\">
    <readable>/</readable>
    <writable>{cwd}</writable>
  </filesystem>
</environment_context>",
            cwd = tree.cwd.display()
        )
    );
}
