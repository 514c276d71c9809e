//! Today's date and the IANA timezone name, read from the system each time they are asked for
//! (a session that crosses midnight gets the new date with its next state).

use std::path::Path;

/// The timezone reported when none can be read.
pub const FALLBACK_TIMEZONE: &str = "Etc/UTC";

/// Today in the local timezone as `YYYY-MM-DD` (UTC if the local time cannot be computed).
pub fn local_date() -> String {
    // SAFETY: time(NULL) only returns the clock.
    let now = unsafe { libc::time(std::ptr::null_mut()) };
    // SAFETY: an all-zero tm is a valid value for localtime_r to overwrite.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid for the call; localtime_r is the thread-safe variant.
    let local = unsafe { libc::localtime_r(&now, &mut tm) };
    if local.is_null() {
        return utc_date(now);
    }
    format!(
        "{:04}-{:02}-{:02}",
        i64::from(tm.tm_year) + 1900,
        tm.tm_mon + 1,
        tm.tm_mday
    )
}

/// The UTC date of `seconds` since the epoch (civil-from-days, proleptic Gregorian).
fn utc_date(seconds: i64) -> String {
    let days = seconds.div_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// The IANA name of the local timezone: `$TZ` when it names one, else the zone
/// `/etc/localtime` links to, else `/etc/timezone`, else [`FALLBACK_TIMEZONE`].
pub fn local_timezone() -> String {
    let link = std::fs::read_link("/etc/localtime").ok();
    let etc_timezone = std::fs::read_to_string("/etc/timezone").ok();
    timezone_from(
        std::env::var("TZ").ok().as_deref(),
        link.as_deref(),
        etc_timezone.as_deref(),
    )
}

/// [`local_timezone`] from its three sources, for tests.
pub(crate) fn timezone_from(
    tz_env: Option<&str>,
    localtime_link: Option<&Path>,
    etc_timezone: Option<&str>,
) -> String {
    let from_env = tz_env.and_then(|tz| {
        let tz = tz.strip_prefix(':').unwrap_or(tz);
        if tz.starts_with('/') {
            zone_of_path(Path::new(tz))
        } else {
            iana_name(tz)
        }
    });
    from_env
        .or_else(|| localtime_link.and_then(zone_of_path))
        .or_else(|| etc_timezone.and_then(|text| iana_name(text.lines().next()?.trim())))
        .unwrap_or_else(|| FALLBACK_TIMEZONE.to_owned())
}

/// The zone name in a path such as `/usr/share/zoneinfo/Europe/Berlin`.
fn zone_of_path(path: &Path) -> Option<String> {
    let text = path.to_str()?;
    let (_, zone) = text.rsplit_once("zoneinfo/")?;
    iana_name(zone)
}

/// `name` when it has the shape of an IANA zone name (`Area/City`, `UTC`, `Etc/GMT+1`); POSIX
/// rules such as `CET-1CEST` are not names and are refused.
fn iana_name(name: &str) -> Option<String> {
    let shaped = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('/')
        && !name
            .split('/')
            .any(|part| part.is_empty() || part == "." || part == "..")
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'_' | b'-' | b'+'))
        && name.bytes().next().is_some_and(|b| b.is_ascii_uppercase());
    let posix_rule = !name.contains('/') && name.bytes().any(|b| b.is_ascii_digit());
    (shaped && !posix_rule).then(|| name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_timezone_sources_in_order() {
        let link = Path::new("/usr/share/zoneinfo/Europe/Berlin");
        assert_eq!(
            timezone_from(Some("Asia/Tokyo"), Some(link), None),
            "Asia/Tokyo"
        );
        assert_eq!(
            timezone_from(Some(":America/New_York"), None, None),
            "America/New_York"
        );
        assert_eq!(
            timezone_from(Some("/usr/share/zoneinfo/Etc/GMT+1"), None, None),
            "Etc/GMT+1"
        );
        // A POSIX rule is not a name: the next source decides.
        assert_eq!(
            timezone_from(Some("CET-1CEST"), Some(link), None),
            "Europe/Berlin"
        );
        assert_eq!(
            timezone_from(None, None, Some("Europe/Paris\n")),
            "Europe/Paris"
        );
        assert_eq!(
            timezone_from(None, Some(Path::new("/etc/x")), None),
            FALLBACK_TIMEZONE
        );
        assert_eq!(
            timezone_from(Some("../../etc/passwd"), None, Some("")),
            FALLBACK_TIMEZONE
        );
        assert_eq!(timezone_from(None, None, None), "Etc/UTC");
        assert_eq!(timezone_from(Some("UTC"), None, None), "UTC");
    }

    #[test]
    fn context_utc_date_is_civil() {
        assert_eq!(utc_date(0), "1970-01-01");
        assert_eq!(utc_date(951_782_400), "2000-02-29");
        assert_eq!(utc_date(1_798_761_599), "2026-12-31");
        assert_eq!(utc_date(1_798_761_600), "2027-01-01");
    }

    #[test]
    fn context_local_date_has_its_shape() {
        let date = local_date();
        assert_eq!(date.len(), 10, "{date}");
        assert_eq!(&date[4..5], "-");
        assert_eq!(&date[7..8], "-");
    }
}
