//! Rendering the projection as `<environment_context>` text, whole or as a diff.

use std::collections::BTreeMap;

use super::{
    Environment, EnvironmentContext, EnvironmentStatus, FilesystemContext, NetworkContext,
};

/// One indentation step.
const INDENT: &str = "  ";

impl EnvironmentContext {
    /// The whole context. Deterministic: environments in id order, lists in their order.
    pub fn render(&self) -> String {
        let mut body = Vec::new();
        if self.is_compact() {
            for env in self.environments.values() {
                compact_environment(env, &mut body);
            }
        } else {
            let items = self
                .environments
                .iter()
                .map(|(id, env)| (id.as_str(), listed_environment(id, env)))
                .collect();
            environments_list(items, &mut body);
        }
        body.push(element(1, "current_date", &self.current_date));
        body.push(element(1, "timezone", &self.timezone));
        if let Some(network) = &self.network {
            network_lines(network, &mut body);
        }
        if let Some(filesystem) = &self.filesystem {
            filesystem_lines(filesystem, &mut body);
        }
        wrap(body)
    }

    /// Only what changed since `previous`, or `None` when nothing did:
    /// - a changed or new environment in full; a removed one as
    ///   `<environment id="..." status="unavailable" />` (a marker of the diff, never a state);
    /// - every current environment when the layout switches between one and several;
    /// - a shell known on one side only is not a change (it is learnt, not changed);
    /// - date, timezone, network and filesystem only when they changed.
    pub fn render_diff(&self, previous: &EnvironmentContext) -> Option<String> {
        let mut body = Vec::new();
        let layout_switched = self.is_compact() != previous.is_compact();
        let changed = |id: &str, env: &Environment| {
            layout_switched
                || previous
                    .environments
                    .get(id)
                    .is_none_or(|before| environment_changed(before, env))
        };
        if self.is_compact() {
            for (id, env) in &self.environments {
                if changed(id, env) {
                    compact_environment(env, &mut body);
                }
            }
        } else {
            let mut items: BTreeMap<&str, Vec<String>> = self
                .environments
                .iter()
                .filter(|(id, env)| changed(id, env))
                .map(|(id, env)| (id.as_str(), listed_environment(id, env)))
                .collect();
            for id in previous.environments.keys() {
                if !self.environments.contains_key(id) {
                    let marker = format!(
                        "{}<environment id=\"{}\" status=\"unavailable\" />",
                        INDENT.repeat(2),
                        escape(id)
                    );
                    items.insert(id.as_str(), vec![marker]);
                }
            }
            environments_list(items, &mut body);
        }
        if self.current_date != previous.current_date {
            body.push(element(1, "current_date", &self.current_date));
        }
        if self.timezone != previous.timezone {
            body.push(element(1, "timezone", &self.timezone));
        }
        if let Some(network) = self
            .network
            .as_ref()
            .filter(|n| Some(*n) != previous.network.as_ref())
        {
            network_lines(network, &mut body);
        }
        if let Some(filesystem) = self
            .filesystem
            .as_ref()
            .filter(|f| Some(*f) != previous.filesystem.as_ref())
        {
            filesystem_lines(filesystem, &mut body);
        }
        (!body.is_empty()).then(|| wrap(body))
    }
}

/// Whether the model must be told about `now` again, having been told about `before`.
fn environment_changed(before: &Environment, now: &Environment) -> bool {
    let shell_changed = matches!((&before.shell, &now.shell), (Some(a), Some(b)) if a != b);
    before.cwd != now.cwd
        || before.status != now.status
        || before.primary != now.primary
        || shell_changed
}

fn wrap(body: Vec<String>) -> String {
    let mut out = String::from("<environment_context>\n");
    for line in body {
        out.push_str(&line);
        out.push('\n');
    }
    out.push_str("</environment_context>");
    out
}

fn compact_environment(env: &Environment, out: &mut Vec<String>) {
    out.push(element(1, "cwd", &env.cwd));
    if let Some(shell) = &env.shell {
        out.push(element(1, "shell", shell));
    }
}

fn listed_environment(id: &str, env: &Environment) -> Vec<String> {
    let pad = INDENT.repeat(2);
    let mut lines = vec![format!(
        "{pad}<environment id=\"{}\" primary=\"{}\">",
        escape(id),
        env.primary
    )];
    lines.push(element(3, "cwd", &env.cwd));
    if let Some(shell) = &env.shell {
        lines.push(element(3, "shell", shell));
    }
    if env.status != EnvironmentStatus::Available {
        lines.push(element(3, "status", env.status.name()));
    }
    lines.push(format!("{pad}</environment>"));
    lines
}

/// The `<environments>` list of `items` (already in id order); nothing when empty.
fn environments_list(items: BTreeMap<&str, Vec<String>>, out: &mut Vec<String>) {
    if items.is_empty() {
        return;
    }
    out.push(format!("{INDENT}<environments>"));
    out.extend(items.into_values().flatten());
    out.push(format!("{INDENT}</environments>"));
}

fn network_lines(network: &NetworkContext, out: &mut Vec<String>) {
    let open = format!("{INDENT}<network mode=\"{}\"", escape(&network.mode));
    if network.allowed_hosts.is_empty() && network.denied_hosts.is_empty() {
        out.push(format!("{open} />"));
        return;
    }
    out.push(format!("{open}>"));
    for host in &network.allowed_hosts {
        out.push(element(2, "allowed_host", host));
    }
    for host in &network.denied_hosts {
        out.push(element(2, "denied_host", host));
    }
    out.push(format!("{INDENT}</network>"));
}

fn filesystem_lines(fs: &FilesystemContext, out: &mut Vec<String>) {
    let open = format!("{INDENT}<filesystem mode=\"{}\"", fs.mode.name());
    let empty = fs.readable.is_empty()
        && fs.writable.is_empty()
        && fs.read_only.is_empty()
        && fs.hidden.is_empty();
    if empty {
        out.push(format!("{open} />"));
        return;
    }
    out.push(format!("{open}>"));
    for (name, paths) in [
        ("readable", &fs.readable),
        ("writable", &fs.writable),
        ("read_only", &fs.read_only),
    ] {
        out.extend(paths.iter().map(|p| element(2, name, p)));
    }
    let pad = INDENT.repeat(2);
    out.extend(
        fs.hidden
            .iter()
            .map(|p| format!("{pad}<hidden escalatable=\"false\">{}</hidden>", escape(p))),
    );
    out.push(format!("{INDENT}</filesystem>"));
}

fn element(depth: usize, name: &str, text: &str) -> String {
    format!("{}<{name}>{}</{name}>", INDENT.repeat(depth), escape(text))
}

/// XML-escapes all five special characters, so a value is safe as text and in either kind of
/// quoted attribute. Line breaks and tabs become character references, so a value (a
/// directory a command named) cannot start a line of its own in the block; other control
/// characters, which XML cannot carry at all, become U+FFFD.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#xA;"),
            '\r' => out.push_str("&#xD;"),
            '\t' => out.push_str("&#x9;"),
            c if c.is_control() => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}
