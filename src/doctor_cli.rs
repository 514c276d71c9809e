//! `cordon doctor`: what this kernel lets cordon enforce, as a table or one JSON object.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{anyhow, Context};

use cordon::doctor::{self, Diagnosis, PresetCheck, Verdict};

/// Exit status when the default preset is not enforced in full here.
const EXIT_NOT_FULLY_ENFORCED: u8 = 1;

#[derive(clap::Args)]
pub struct DoctorArgs {
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
    /// Resolve the presets in this directory (default: the current directory), as `cordon run
    /// -C DIR` would.
    #[arg(short = 'C', long = "cwd", value_name = "DIR")]
    cwd: Option<PathBuf>,
}

pub fn run(args: DoctorArgs) -> anyhow::Result<ExitCode> {
    let here = std::env::current_dir().context("cannot read the current directory")?;
    let cwd = match &args.cwd {
        Some(dir) => here.join(dir),
        None => here,
    };
    if !cwd.is_dir() {
        return Err(anyhow!(
            "working directory {:?} does not exist or is not a directory",
            cwd
        ));
    }
    // The probes fork: before the runtime starts any thread.
    let features = doctor::probe_features();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let presets = runtime.block_on(doctor::check_presets(&cwd));
    let diagnosis = Diagnosis::new(features, presets);
    if args.json {
        println!(
            "{}",
            serde_json::to_string(&diagnosis).context("cannot encode the diagnosis")?
        );
    } else {
        print!("{}", render(&diagnosis));
    }
    Ok(if diagnosis.default_fully_enforced {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_NOT_FULLY_ENFORCED)
    })
}

/// The table: features, presets, hints, verdict.
fn render(d: &Diagnosis) -> String {
    let mut out = format!("kernel {}\n\n", d.kernel);
    let width = d.features.iter().map(|f| f.name.len()).max().unwrap_or(0);
    out.push_str(&format!("{:width$}  available  what it gives\n", "feature"));
    for f in &d.features {
        out.push_str(&format!(
            "{:width$}  {:9}  {}\n",
            f.name,
            if f.available { "yes" } else { "NO" },
            f.detail
        ));
    }
    out.push('\n');
    let width = d.presets.iter().map(|p| p.preset.len()).max().unwrap_or(0);
    out.push_str(&format!("{:width$}  {:11}  here\n", "preset", "verdict"));
    for p in &d.presets {
        out.push_str(&format!(
            "{:width$}  {:11}  {}\n",
            p.preset,
            verdict_name(p.verdict),
            preset_summary(p)
        ));
        for line in preset_details(p) {
            out.push_str(&format!("{:width$}  {:11}    {line}\n", "", ""));
        }
    }
    out.push('\n');
    let width = d.evidence.iter().map(|e| e.name.len()).max().unwrap_or(0);
    out.push_str(&format!(
        "{:width$}  {:4}  what it finds\n",
        "evidence", "used"
    ));
    for e in &d.evidence {
        out.push_str(&format!(
            "{:width$}  {:4}  {}\n",
            e.name,
            if e.used { "yes" } else { "no" },
            e.detail
        ));
    }
    // One line per fix: several features often share one (every namespace needs the user
    // namespace).
    let mut hints: Vec<(Vec<&str>, &str)> = Vec::new();
    for f in &d.features {
        let Some(hint) = f.hint.as_deref() else {
            continue;
        };
        match hints.iter_mut().find(|(_, h)| *h == hint) {
            Some((names, _)) => names.push(&f.name),
            None => hints.push((vec![&f.name], hint)),
        }
    }
    if !hints.is_empty() {
        out.push_str("\nhints\n");
        for (names, hint) in hints {
            out.push_str(&format!("  {}: {hint}\n", names.join(", ")));
        }
    }
    out.push('\n');
    out.push_str(&if d.default_fully_enforced {
        format!(
            "the default preset ({}) is fully enforced here\n",
            d.default_preset
        )
    } else {
        format!(
            "the default preset ({}) is NOT fully enforced here (exit {EXIT_NOT_FULLY_ENFORCED})\n",
            d.default_preset
        )
    });
    out
}

fn verdict_name(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Enforced => "enforced",
        Verdict::Downgraded => "downgraded",
        Verdict::Refused => "refused",
        Verdict::Unsandboxed => "unsandboxed",
        Verdict::Error => "error",
    }
}

fn preset_summary(p: &PresetCheck) -> String {
    let names = |layers: &[cordon::sandbox::status::Layer]| {
        layers
            .iter()
            .map(|l| {
                serde_json::to_value(l)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default()
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    match p.verdict {
        Verdict::Unsandboxed => "no sandbox at all, by choice".into(),
        Verdict::Refused | Verdict::Error => p
            .refusal
            .as_ref()
            .map(|r| format!("{}: {}", r.step, r.message))
            .unwrap_or_default(),
        Verdict::Enforced | Verdict::Downgraded => {
            format!("Landlock ABI {}; {}", p.landlock_abi, names(&p.layers))
        }
    }
}

/// One line per thing not enforced: downgrades, then missing namespace layers.
fn preset_details(p: &PresetCheck) -> Vec<String> {
    let mut lines = cordon_sandbox::status::not_enforced_lines(&p.downgrades);
    lines.extend(p.missing_layers.iter().map(|m| {
        let name = serde_json::to_value(m.layer)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        format!("no {name}: {}", m.effect)
    }));
    lines
}
