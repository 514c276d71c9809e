//! Parsing durations and byte counts from the command line.

use std::time::Duration;

/// Parses `500ms`, `10s`, `2m`, `1h`, `3d` (a bare number is seconds).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration like 500ms, 10s, 2m or 1h"))?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "" | "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        "d" => value * 86400.0,
        _ => {
            return Err(format!(
                "{text:?}: unknown unit {unit:?} (use ms, s, m, h or d)"
            ))
        }
    };
    if !(seconds > 0.0 && seconds < 1e9) {
        return Err(format!("{text:?} must be a positive duration"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// Parses a byte count with an optional K, M or G suffix (powers of 1024).
pub fn parse_bytes(text: &str) -> Result<usize, String> {
    let upper = text.to_ascii_uppercase();
    let trimmed = upper.trim_end_matches("IB").trim_end_matches('B');
    let (digits, multiplier) = match trimmed.chars().last() {
        Some('K') => (&trimmed[..trimmed.len() - 1], 1usize << 10),
        Some('M') => (&trimmed[..trimmed.len() - 1], 1 << 20),
        Some('G') => (&trimmed[..trimmed.len() - 1], 1 << 30),
        _ => (trimmed, 1),
    };
    digits
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(multiplier))
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("{text:?} is not a byte count like 1048576, 64K or 1M"))
}
