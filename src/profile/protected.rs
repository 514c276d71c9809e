//! What `workspace-write` (and every profile extending it) protects without being asked: the
//! places where a confined command could leave something that runs unconfined the next time
//! the person uses git, opens a shell or an editor, or where their credentials live.
//!
//! The list is data, one entry per path with the reason it is there. A profile lifts an entry
//! by naming it (`[filesystem] unprotect = ["~/.ssh"]`); see [`Protected::name`].
//!
//! What happens to an entry that does not exist: a read-only entry inside a writable root is
//! kept, and the namespace layer puts an empty read-only placeholder there for the run, so the
//! command cannot create it (a `.git/` planted in a directory that is not a repository, with
//! `core.fsmonitor` in its config, would run the next time the person or their prompt runs
//! `git status` there; a new `~/.bash_profile` would take over the next login shell). A hidden
//! entry that does not exist is made such a placeholder too when a writable root covers it
//! (a new `~/.ssh/config` with `ProxyCommand`, a `~/.kube/config` with an exec plugin, an
//! `~/.aws/config` with `credential_process` all run commands). Elsewhere nothing can create
//! it, and nothing is added; nor in a shared temporary directory such as `/tmp`, where a
//! placeholder would stop every other user from creating the name. Concurrent runs share
//! placeholders (see `sandbox-helper/src/namespaces/mounts.rs`). The price: inside the sandbox
//! such a path is an empty read-only file (a directory for `.git`), so `git init` in a directory
//! that is not a repository fails with `EROFS`; lift `.git` to allow it.

/// Where a protected path is looked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Anchor {
    /// Directly inside every writable root that is not a shared temporary directory.
    EveryWritableRoot,
    /// Below `$HOME`.
    Home,
    /// Below `$XDG_CONFIG_HOME`, else `~/.config`.
    ConfigHome,
    /// Below `$XDG_CACHE_HOME`, else `~/.cache`.
    CacheHome,
    /// An absolute path, protected only when cordon runs as root (others cannot read it).
    AbsoluteAsRoot,
}

/// How it is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Protection {
    /// Read-only (inside a writable root; elsewhere it already is).
    ReadOnly,
    /// Hidden: an empty directory or file in its place.
    Hidden,
}

/// One protected path.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Protected {
    /// How a profile names it in `unprotect`, and how messages name it.
    pub name: &'static str,
    pub anchor: Anchor,
    /// The path below the anchor.
    pub rest: &'static str,
    pub protection: Protection,
    /// Why it is protected.
    pub reason: &'static str,
}

const fn entry(
    name: &'static str,
    anchor: Anchor,
    rest: &'static str,
    protection: Protection,
    reason: &'static str,
) -> Protected {
    Protected {
        name,
        anchor,
        rest,
        protection,
        reason,
    }
}

use Anchor::{AbsoluteAsRoot, CacheHome, ConfigHome, EveryWritableRoot, Home};
use Protection::{Hidden, ReadOnly};

/// Every protected path of `workspace-write`.
#[rustfmt::skip]
pub(crate) const PROTECTED: &[Protected] = &[
    // Inside every writable root: what runs when the person next opens the project.
    entry(".git", EveryWritableRoot, ".git", ReadOnly,
        "hooks, and config (core.fsmonitor, core.hooksPath, aliases, filters) run on the next git command; also what a gitdir: file names, the core.hooksPath directory and submodules' .git"),
    entry(".gitmodules", EveryWritableRoot, ".gitmodules", ReadOnly,
        "says which submodules' .git files are protected too, and where git fetches them from"),
    entry(".cordon", EveryWritableRoot, ".cordon", ReadOnly,
        "cordon's own project directory: what it says must not be chosen by a confined command"),
    entry(".vscode", EveryWritableRoot, ".vscode", ReadOnly,
        "tasks with runOn folderOpen, and interpreter, formatter and terminal paths in settings, run when VS Code opens the folder"),
    entry(".idea", EveryWritableRoot, ".idea", ReadOnly,
        "JetBrains run configurations, startup tasks and tool paths run from the IDE"),
    entry(".devcontainer", EveryWritableRoot, ".devcontainer", ReadOnly,
        "initializeCommand runs on the host when the dev container is opened"),
    entry(".envrc", EveryWritableRoot, ".envrc", ReadOnly,
        "direnv evaluates it when a shell enters the directory"),
    entry(".husky", EveryWritableRoot, ".husky", ReadOnly,
        "husky points core.hooksPath here: these are the repository's git hooks"),
    entry(".githooks", EveryWritableRoot, ".githooks", ReadOnly,
        "the usual core.hooksPath of projects that keep hooks in the tree"),
    entry(".pre-commit-config.yaml", EveryWritableRoot, ".pre-commit-config.yaml", ReadOnly,
        "the commands pre-commit's git hook runs on the next commit"),
    entry(".lefthook.yml", EveryWritableRoot, ".lefthook.yml", ReadOnly,
        "the commands lefthook's git hooks run"),
    entry("lefthook.yml", EveryWritableRoot, "lefthook.yml", ReadOnly,
        "the commands lefthook's git hooks run"),
    entry(".claude", EveryWritableRoot, ".claude", ReadOnly,
        "Claude Code hooks and settings run commands in the next agent session, unconfined"),
    entry(".mcp.json", EveryWritableRoot, ".mcp.json", ReadOnly,
        "MCP servers an agent starts when it next opens the project"),
    entry(".codex", EveryWritableRoot, ".codex", ReadOnly,
        "Codex configuration (sandbox settings, MCP servers) for the next agent session"),
    entry(".cursor", EveryWritableRoot, ".cursor", ReadOnly,
        "Cursor rules and MCP servers for the next agent session"),
    // Wherever they are (they matter when a writable root covers them, e.g. cwd = $HOME).
    entry("~/.bashrc", Home, ".bashrc", ReadOnly, "run by every interactive bash"),
    entry("~/.bash_profile", Home, ".bash_profile", ReadOnly, "run by a login bash (first of three)"),
    entry("~/.bash_login", Home, ".bash_login", ReadOnly, "run by a login bash when there is no .bash_profile"),
    entry("~/.profile", Home, ".profile", ReadOnly, "run by login shells (sh, dash, bash without .bash_profile)"),
    entry("~/.bash_logout", Home, ".bash_logout", ReadOnly, "run when a login bash exits"),
    entry("~/.bash_aliases", Home, ".bash_aliases", ReadOnly, "sourced by Debian's and Ubuntu's default .bashrc"),
    entry("~/.zshenv", Home, ".zshenv", ReadOnly, "run by every zsh, scripts included"),
    entry("~/.zprofile", Home, ".zprofile", ReadOnly, "run by a login zsh"),
    entry("~/.zshrc", Home, ".zshrc", ReadOnly, "run by every interactive zsh"),
    entry("~/.zlogin", Home, ".zlogin", ReadOnly, "run by a login zsh"),
    entry("~/.zlogout", Home, ".zlogout", ReadOnly, "run when a login zsh exits"),
    entry("~/.config/fish", ConfigHome, "fish", ReadOnly, "config.fish, conf.d and functions run by every fish"),
    entry("~/.kshrc", Home, ".kshrc", ReadOnly, "run by interactive ksh"),
    entry("~/.cshrc", Home, ".cshrc", ReadOnly, "run by every csh"),
    entry("~/.tcshrc", Home, ".tcshrc", ReadOnly, "run by every tcsh"),
    entry("~/.config/autostart", ConfigHome, "autostart", ReadOnly, "desktop sessions start these programs at login"),
    entry("~/.config/systemd", ConfigHome, "systemd", ReadOnly, "user units systemd starts at login or on a timer"),
    entry("~/.gitconfig", Home, ".gitconfig", ReadOnly,
        "aliases, core.fsmonitor, core.hooksPath and credential helpers run on any git command"),
    entry("~/.config/git", ConfigHome, "git", ReadOnly, "git's other global configuration (config, attributes)"),
    entry("~/.config/cordon", ConfigHome, "cordon", ReadOnly, "cordon's own configuration"),
    entry("~/.cache/cordon", CacheHome, "cordon", ReadOnly,
        "cordon's caches: shell snapshots that later runs source"),
    // Hidden: credentials.
    entry("~/.ssh", Home, ".ssh", Hidden, "private keys; config (ProxyCommand) and authorized_keys run or admit commands"),
    entry("~/.gnupg", Home, ".gnupg", Hidden, "private keys"),
    entry("~/.aws", Home, ".aws", Hidden, "AWS access keys; credential_process in config runs commands"),
    entry("~/.azure", Home, ".azure", Hidden, "Azure CLI tokens"),
    entry("~/.config/gcloud", ConfigHome, "gcloud", Hidden, "Google Cloud credentials and tokens"),
    entry("~/.config/gh", ConfigHome, "gh", Hidden, "GitHub CLI token"),
    entry("~/.git-credentials", Home, ".git-credentials", Hidden, "git's plain-text credential store"),
    entry("~/.netrc", Home, ".netrc", Hidden, "passwords for curl, git and ftp over the network"),
    entry("~/.docker/config.json", Home, ".docker/config.json", Hidden,
        "registry credentials; credsStore names a helper docker runs"),
    entry("~/.kube", Home, ".kube", Hidden, "cluster credentials; exec plugins in kubeconfig run commands"),
    entry("~/.npmrc", Home, ".npmrc", Hidden, "npm registry tokens"),
    entry("~/.pypirc", Home, ".pypirc", Hidden, "PyPI upload tokens"),
    entry("~/.cargo/credentials.toml", Home, ".cargo/credentials.toml", Hidden, "crates.io token"),
    entry("~/.cargo/credentials", Home, ".cargo/credentials", Hidden, "crates.io token (older cargo)"),
    entry("~/.gem/credentials", Home, ".gem/credentials", Hidden, "RubyGems API key"),
    entry("~/.vault-token", Home, ".vault-token", Hidden, "HashiCorp Vault token"),
    entry("~/.terraform.d/credentials.tfrc.json", Home, ".terraform.d/credentials.tfrc.json", Hidden,
        "Terraform Cloud tokens"),
    entry("~/.password-store", Home, ".password-store", Hidden, "pass's encrypted passwords"),
    entry("~/.local/share/keyrings", Home, ".local/share/keyrings", Hidden, "GNOME keyring files"),
    entry("/etc/shadow", AbsoluteAsRoot, "/etc/shadow", Hidden, "password hashes, readable only by root"),
    entry("/etc/gshadow", AbsoluteAsRoot, "/etc/gshadow", Hidden, "group password hashes, readable only by root"),
];

/// The entry `name` names, if any.
pub(crate) fn find(name: &str) -> Option<&'static Protected> {
    PROTECTED.iter().find(|p| p.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_every_entry_has_a_reason() {
        for (i, p) in PROTECTED.iter().enumerate() {
            assert!(!p.reason.is_empty(), "{}", p.name);
            assert!(
                PROTECTED[..i].iter().all(|q| q.name != p.name),
                "{} twice",
                p.name
            );
            assert_eq!(find(p.name).map(|q| q.rest), Some(p.rest));
        }
    }
}
