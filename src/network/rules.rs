//! Which hosts the proxy lets a command reach: `network.allow` and `network.deny` entries
//! (deny wins), and the address ranges refused after resolution unless an allow entry names
//! the host exactly.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use cordon_sandbox::policy::split_host_pattern;

/// One `allow`/`deny` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRule {
    /// The entry as written, for denial records.
    pub entry: String,
    /// Lower-case host, or the domain of a `*.` wildcard.
    host: String,
    /// `*.domain`: every subdomain of `host`, not `host` itself.
    wildcard: bool,
    /// The one port it covers; `None` for every port.
    port: Option<u16>,
}

impl HostRule {
    /// Parses an entry of the form the policy accepts.
    pub fn parse(entry: &str) -> Result<HostRule, String> {
        let (host, wildcard, port) =
            split_host_pattern(entry).map_err(|why| format!("{entry:?}: {why}"))?;
        Ok(HostRule {
            entry: entry.to_owned(),
            host,
            wildcard,
            port,
        })
    }

    /// Whether it covers `host` (normalised, see [`normalise_host`]) at `port`.
    pub fn matches(&self, host: &str, port: u16) -> bool {
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
        if self.wildcard {
            host.len() > self.host.len() + 1
                && host.ends_with(&self.host)
                && host.as_bytes()[host.len() - self.host.len() - 1] == b'.'
        } else {
            host == self.host
        }
    }

    /// A rule that names one host (no wildcard) may reach that host on a loopback, private or
    /// link-local address: the person wrote that exact name down.
    pub fn names_host_exactly(&self) -> bool {
        !self.wildcard
    }
}

/// The allow and deny lists of one run.
#[derive(Debug, Clone, Default)]
pub struct HostRules {
    allow: Vec<HostRule>,
    deny: Vec<HostRule>,
}

/// What the lists say about one `host:port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// An allow entry covers it and no deny entry does.
    Allowed {
        /// Whether the covering entry names the host exactly (then non-public addresses are
        /// reachable too).
        exact: bool,
    },
    /// A deny entry covers it.
    Denied {
        /// The deny entry.
        entry: String,
    },
    /// No entry covers it: refused, or asked of the approver when there is one.
    Unlisted,
}

impl HostRules {
    /// The lists of a policy; the policy's validation has checked their form.
    pub fn new(allow: &[String], deny: &[String]) -> Result<HostRules, String> {
        let parse = |list: &[String]| -> Result<Vec<HostRule>, String> {
            list.iter().map(|e| HostRule::parse(e)).collect()
        };
        for entry in allow {
            let rule = HostRule::parse(entry)?;
            if names_own_loopback(&rule.host) {
                return Err(format!(
                    "network.allow: {entry:?} names loopback, which inside the sandbox is the sandbox's own (clients never send it to the proxy); to reach a service on the host's loopback, use network.host_ports = [PORT] (--allow-host-port PORT)"
                ));
            }
        }
        Ok(HostRules {
            allow: parse(allow)?,
            deny: parse(deny)?,
        })
    }

    /// The verdict on `host` (normalised) at `port`. Deny wins over allow.
    pub fn verdict(&self, host: &str, port: u16) -> Verdict {
        if let Some(rule) = self.deny.iter().find(|r| r.matches(host, port)) {
            return Verdict::Denied {
                entry: rule.entry.clone(),
            };
        }
        let covering: Vec<&HostRule> = self
            .allow
            .iter()
            .filter(|r| r.matches(host, port))
            .collect();
        if covering.is_empty() {
            return Verdict::Unlisted;
        }
        Verdict::Allowed {
            exact: covering.iter().any(|r| r.names_host_exactly()),
        }
    }
}

/// `localhost` and the loopback addresses: the command's own namespace, never the proxy's
/// business (they are in `NO_PROXY`).
fn names_own_loopback(host: &str) -> bool {
    host == "localhost"
        || host.ends_with(".localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| match ip {
            IpAddr::V4(v4) => v4.is_loopback(),
            IpAddr::V6(v6) => v6.is_loopback(),
        })
}

/// A host as clients send it, in the form the rules compare: lower-case, no trailing dot, no
/// brackets around an IPv6 address. `None` for anything that is not a host name or address
/// (spaces, `@`, `/`, an empty name), which is refused before any lookup.
pub fn normalise_host(raw: &str) -> Option<String> {
    let host = raw
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(raw);
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    if host.parse::<Ipv6Addr>().is_ok() {
        return Some(host);
    }
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    (!host.is_empty() && host.len() <= 253 && host.split('.').all(label_ok)).then_some(host)
}

/// Address ranges the proxy never connects to on the strength of a wildcard, each with why:
/// they lead back to the host itself, to the local network behind it, or to the cloud's
/// metadata service, none of which an allow-list of internet hosts means to open.
const REFUSED_V4: &[(Ipv4Addr, u8, &str)] = &[
    (
        Ipv4Addr::new(0, 0, 0, 0),
        8,
        "\"this network\" (0.0.0.0 reaches the host itself)",
    ),
    (
        Ipv4Addr::new(127, 0, 0, 0),
        8,
        "loopback (the host's own services)",
    ),
    (Ipv4Addr::new(10, 0, 0, 0), 8, "private (RFC 1918)"),
    (Ipv4Addr::new(172, 16, 0, 0), 12, "private (RFC 1918)"),
    (Ipv4Addr::new(192, 168, 0, 0), 16, "private (RFC 1918)"),
    (
        Ipv4Addr::new(169, 254, 0, 0),
        16,
        "link-local (169.254.169.254 is the cloud metadata service)",
    ),
    (
        Ipv4Addr::new(100, 64, 0, 0),
        10,
        "shared address space (carrier-grade NAT, the provider's network)",
    ),
    (
        Ipv4Addr::new(192, 0, 0, 0),
        24,
        "IETF protocol assignments (not a public host)",
    ),
    (
        Ipv4Addr::new(198, 18, 0, 0),
        15,
        "benchmarking (not a public host)",
    ),
    (
        Ipv4Addr::new(224, 0, 0, 0),
        4,
        "multicast (the local network)",
    ),
    (Ipv4Addr::new(240, 0, 0, 0), 4, "reserved and broadcast"),
];

/// The IPv6 counterparts; IPv4-mapped and NAT64 addresses are judged by the IPv4 inside.
const REFUSED_V6: &[(Ipv6Addr, u8, &str)] = &[
    (
        Ipv6Addr::UNSPECIFIED,
        128,
        "unspecified (reaches the host itself)",
    ),
    (
        Ipv6Addr::LOCALHOST,
        128,
        "loopback (the host's own services)",
    ),
    (Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0), 10, "link-local"),
    (
        Ipv6Addr::new(0xfec0, 0, 0, 0, 0, 0, 0, 0),
        10,
        "site-local (the local network)",
    ),
    (
        Ipv6Addr::new(0xfc00, 0, 0, 0, 0, 0, 0, 0),
        7,
        "unique local (private)",
    ),
    (
        Ipv6Addr::new(0xff00, 0, 0, 0, 0, 0, 0, 0),
        8,
        "multicast (the local network)",
    ),
];

/// Why the proxy must not connect to `ip` unless an allow entry names the host exactly, or
/// `None` for a public address.
pub fn non_public(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => REFUSED_V4
            .iter()
            .find(|(net, bits, _)| {
                prefix_matches(u32::from(v4).into(), u32::from(*net).into(), *bits, 32)
            })
            .map(|(_, _, why)| *why),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return non_public(IpAddr::V4(v4));
            }
            let segments = v6.segments();
            // 64:ff9b::/96, NAT64: the IPv4 address it translates to decides.
            if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
                let o = v6.octets();
                return non_public(IpAddr::V4(Ipv4Addr::new(o[12], o[13], o[14], o[15])));
            }
            REFUSED_V6
                .iter()
                .find(|(net, bits, _)| prefix_matches(u128::from(v6), u128::from(*net), *bits, 128))
                .map(|(_, _, why)| *why)
                // ::/96, IPv4-compatible (deprecated): some stacks take ::7f00:1 for 127.0.0.1.
                .or((segments[..6] == [0; 6])
                    .then_some("IPv4-compatible (deprecated; it names the IPv4 address inside)"))
        }
    }
}

fn prefix_matches(addr: u128, net: u128, bits: u8, width: u8) -> bool {
    let shift = u32::from(width - bits);
    shift >= 128 || (addr >> shift) == (net >> shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(allow: &[&str], deny: &[&str]) -> HostRules {
        let own = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        HostRules::new(&own(allow), &own(deny)).unwrap()
    }

    #[test]
    fn wildcards_cover_subdomains_only_and_deny_wins() {
        let r = rules(
            &["pypi.org", "*.pythonhosted.org", "github.com:443"],
            &["evil.pythonhosted.org"],
        );
        assert_eq!(r.verdict("pypi.org", 443), Verdict::Allowed { exact: true });
        assert_eq!(
            r.verdict("files.pythonhosted.org", 443),
            Verdict::Allowed { exact: false }
        );
        assert_eq!(r.verdict("pythonhosted.org", 443), Verdict::Unlisted);
        assert_eq!(r.verdict("xpythonhosted.org", 443), Verdict::Unlisted);
        assert_eq!(
            r.verdict("github.com", 443),
            Verdict::Allowed { exact: true }
        );
        assert_eq!(r.verdict("github.com", 22), Verdict::Unlisted);
        assert_eq!(
            r.verdict("evil.pythonhosted.org", 443),
            Verdict::Denied {
                entry: "evil.pythonhosted.org".into()
            }
        );
        assert_eq!(r.verdict("pypi.org.evil.com", 443), Verdict::Unlisted);
    }

    #[test]
    fn loopback_cannot_be_allowed_through_the_proxy() {
        for entry in [
            "localhost",
            "localhost:5432",
            "127.0.0.1:80",
            "[::1]:80",
            "db.localhost",
        ] {
            let err = HostRules::new(&[entry.to_string()], &[]).unwrap_err();
            assert!(err.contains("network.host_ports"), "{entry}: {err}");
        }
    }

    #[test]
    fn hosts_are_normalised_and_junk_refused() {
        assert_eq!(normalise_host("PyPI.org."), Some("pypi.org".into()));
        assert_eq!(normalise_host("[::1]"), Some("::1".into()));
        for junk in ["", "a b", "user@host", "host/x", "a..b", "%00"] {
            assert_eq!(normalise_host(junk), None, "{junk:?}");
        }
    }

    #[test]
    fn local_and_metadata_addresses_are_not_public() {
        for ip in [
            "127.0.0.1",
            "127.1.2.3",
            "0.0.0.0",
            "10.1.2.3",
            "172.31.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
            "::127.0.0.1",
            "::a9fe:a9fe",
        ] {
            assert!(
                non_public(ip.parse().unwrap()).is_some(),
                "{ip} taken for public"
            );
        }
        for ip in ["93.184.216.34", "172.32.0.1", "2606:4700::1111", "1.1.1.1"] {
            assert_eq!(non_public(ip.parse().unwrap()), None, "{ip}");
        }
        assert!(non_public("::1".parse().unwrap())
            .unwrap()
            .starts_with("loopback"));
        assert!(non_public("169.254.169.254".parse().unwrap())
            .unwrap()
            .contains("metadata"));
    }
}
