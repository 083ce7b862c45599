//! Cron schedules in the five-field form the Agent Server API takes (`minute hour day-of-month
//! month day-of-week`, in UTC), and the RFC 3339 times a cron's `end_time` is written in.
//!
//! Each field is `*`, a number, a range `a-b`, a step `*/n` or `a-b/n` (or `a/n`: from `a` to the
//! field's end), or a comma-separated list of these; months and weekdays also take their English
//! three-letter names (`jan`, `mon`), and a weekday may be 7 for Sunday. As in Vixie cron, when
//! both day-of-month and day-of-week are restricted (neither is `*`), a day matching either one
//! matches. `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight` and `@hourly`
//! stand for their usual five fields. Seconds and time zones other than UTC are not supported:
//! a schedule names minutes, in UTC.

/// Why a schedule or a time was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// Not five fields.
    #[error("schedule `{0}`: use five fields, `minute hour day-of-month month day-of-week` (UTC)")]
    Fields(String),
    /// A field that does not parse or is out of range.
    #[error("schedule `{schedule}`: {field} field `{text}`: {reason}")]
    Field {
        /// The whole schedule.
        schedule: String,
        /// Which field (`minute`, `hour`, …).
        field: &'static str,
        /// The field's text.
        text: String,
        /// What is wrong.
        reason: String,
    },
    /// A time that is not RFC 3339.
    #[error("time `{0}`: use RFC 3339, e.g. 2026-11-28T09:00:00Z")]
    Time(String),
}

/// A parsed schedule: for each field, the set of values it matches (bit `v` set for value `v`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    minutes: u64,
    hours: u64,
    days: u64,
    months: u64,
    weekdays: u64,
    days_star: bool,
    weekdays_star: bool,
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const WEEKDAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

/// The longest a schedule is searched for its next time: five years covers every schedule that
/// matches at all (a 29 February, a weekday, a month).
const SEARCH_DAYS: i64 = 5 * 366;

impl Schedule {
    /// Parses a five-field schedule (or an `@` macro).
    pub fn parse(text: &str) -> Result<Self, ScheduleError> {
        let expanded = match text.trim() {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            other => other,
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        let [mi, h, dom, mon, dow] = fields[..] else {
            return Err(ScheduleError::Fields(text.to_string()));
        };
        let field = |name: &'static str, f: &str, lo: u32, hi: u32, names: &[&str]| {
            parse_field(f, lo, hi, names).map_err(|reason| ScheduleError::Field {
                schedule: text.to_string(),
                field: name,
                text: f.to_string(),
                reason,
            })
        };
        let mut weekdays = field("day-of-week", dow, 0, 7, &WEEKDAYS)?;
        if weekdays & (1 << 7) != 0 {
            weekdays = (weekdays & !(1 << 7)) | 1;
        }
        Ok(Self {
            minutes: field("minute", mi, 0, 59, &[])?,
            hours: field("hour", h, 0, 23, &[])?,
            days: field("day-of-month", dom, 1, 31, &[])?,
            months: field("month", mon, 1, 12, &MONTHS)?,
            weekdays,
            days_star: dom.starts_with('*'),
            weekdays_star: dow.starts_with('*'),
        })
    }

    fn day_matches(&self, day: i64) -> bool {
        let (_, m, d) = civil_from_days(day);
        if self.months & (1 << m) == 0 {
            return false;
        }
        // 1970-01-01 was a Thursday.
        let wd = (day + 4).rem_euclid(7);
        let by_dom = self.days & (1 << d) != 0;
        let by_dow = self.weekdays & (1 << wd) != 0;
        match (self.days_star, self.weekdays_star) {
            (false, false) => by_dom || by_dow,
            _ => by_dom && by_dow,
        }
    }

    /// The first time the schedule names strictly after `after_ms` (milliseconds since the Unix
    /// epoch), on a whole minute; `None` when it names none within five years (`0 0 30 2 *`).
    pub fn next_after(&self, after_ms: u64) -> Option<u64> {
        let first = after_ms / 60_000 + 1;
        let (mut day, mut minute) = ((first / 1440) as i64, (first % 1440) as u32);
        for _ in 0..SEARCH_DAYS {
            if self.day_matches(day) {
                for m in minute..1440 {
                    if self.hours & (1 << (m / 60)) != 0 && self.minutes & (1 << (m % 60)) != 0 {
                        return Some((day as u64 * 1440 + u64::from(m)) * 60_000);
                    }
                }
            }
            day += 1;
            minute = 0;
        }
        None
    }
}

fn value(s: &str, lo: u32, hi: u32, names: &[&str]) -> Result<u32, String> {
    let lower = s.to_ascii_lowercase();
    let v = match names.iter().position(|n| *n == lower) {
        // Months are named from 1 (their `lo`), weekdays from 0.
        Some(i) => i as u32 + lo,
        None => s
            .parse::<u32>()
            .map_err(|_| format!("`{s}` is not a number"))?,
    };
    if v < lo || v > hi {
        return Err(format!("{v} is outside {lo}-{hi}"));
    }
    Ok(v)
}

fn parse_field(f: &str, lo: u32, hi: u32, names: &[&str]) -> Result<u64, String> {
    let mut set = 0u64;
    for part in f.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => {
                let step: u32 = s
                    .parse()
                    .map_err(|_| format!("step `{s}` is not a number"))?;
                if step == 0 {
                    return Err("a step must be at least 1".into());
                }
                (r, Some(step))
            }
            None => (part, None),
        };
        let (a, b) = match range {
            "*" => (lo, hi),
            r => match r.split_once('-') {
                Some((a, b)) => (value(a, lo, hi, names)?, value(b, lo, hi, names)?),
                // `a/n` runs from `a` to the field's end.
                None if step.is_some() => (value(r, lo, hi, names)?, hi),
                None => {
                    let v = value(r, lo, hi, names)?;
                    (v, v)
                }
            },
        };
        if a > b {
            return Err(format!("range {a}-{b} runs backwards"));
        }
        let step = step.unwrap_or(1);
        let mut v = a;
        while v <= b {
            set |= 1 << v;
            v += step;
        }
    }
    Ok(set)
}

/// (year, month 1-12, day 1-31) of a day counted from 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Days from 1970-01-01 to a civil date.
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Milliseconds since the Unix epoch of an RFC 3339 time (`2026-11-28T09:00:00Z`,
/// `2026-11-28T09:00:00.5+01:00`; a time without an offset is read as UTC, as Python's
/// `isoformat()` of a naive time is).
pub fn parse_time(s: &str) -> Result<u64, ScheduleError> {
    let bad = || ScheduleError::Time(s.to_string());
    let t = s.trim();
    let num = |r: std::ops::Range<usize>| -> Result<i64, ScheduleError> {
        let part = t.get(r).ok_or_else(bad)?;
        if !part.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        part.parse::<i64>().map_err(|_| bad())
    };
    let b = t.as_bytes();
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return Err(bad());
    }
    if b[13] != b':' || b[16] != b':' {
        return Err(bad());
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return Err(bad());
    }
    let mut rest = &t[19..];
    let mut ms = 0i64;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad());
        }
        let first3: String = frac[..digits]
            .chars()
            .chain("000".chars())
            .take(3)
            .collect();
        ms = first3.parse().map_err(|_| bad())?;
        rest = &frac[digits..];
    }
    let offset_min = match rest {
        "" | "Z" | "z" => 0,
        o if o.len() == 6 && (o.starts_with('+') || o.starts_with('-')) && &o[3..4] == ":" => {
            let hh: i64 = o[1..3].parse().map_err(|_| bad())?;
            let mm: i64 = o[4..6].parse().map_err(|_| bad())?;
            let sign = if o.starts_with('-') { -1 } else { 1 };
            sign * (hh * 60 + mm)
        }
        _ => return Err(bad()),
    };
    let days = days_from_civil(y, mo as u32, d as u32);
    let total = ((days * 1440 + h * 60 + mi - offset_min) * 60 + sec) * 1000 + ms;
    u64::try_from(total).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::time::rfc3339;

    fn at(s: &str) -> u64 {
        parse_time(s).unwrap()
    }

    fn next(schedule: &str, after: &str) -> String {
        rfc3339(
            Schedule::parse(schedule)
                .unwrap()
                .next_after(at(after))
                .unwrap(),
        )
    }

    #[test]
    fn rfc3339_times_read_back_as_they_were_written() {
        for ms in [0, 951_782_400_123, 1_795_528_800_000, 1_795_528_859_999] {
            assert_eq!(at(&rfc3339(ms)), ms);
        }
        assert_eq!(at("2026-11-24T15:00:00+01:00"), at("2026-11-24T14:00:00Z"));
        assert_eq!(at("2026-11-24T14:00:00"), at("2026-11-24T14:00:00.000Z"));
        assert_eq!(at("2026-11-24T14:00:00.5Z") % 1000, 500);
        for bad in [
            "tomorrow",
            "2026-11-24",
            "2026-13-01T00:00:00Z",
            "2026-11-24T14:00:00+1",
        ] {
            assert!(parse_time(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_next_time_is_the_first_matching_minute_strictly_after() {
        assert_eq!(
            next("* * * * *", "2026-11-24T14:00:00Z"),
            "2026-11-24T14:01:00.000Z"
        );
        assert_eq!(
            next("* * * * *", "2026-11-24T14:00:59.999Z"),
            "2026-11-24T14:01:00.000Z"
        );
        assert_eq!(
            next("*/15 * * * *", "2026-11-24T14:07:00Z"),
            "2026-11-24T14:15:00.000Z"
        );
        assert_eq!(
            next("0 9 * * *", "2026-11-24T09:00:00Z"),
            "2026-11-25T09:00:00.000Z"
        );
        assert_eq!(
            next("30 8-10/2 * * *", "2026-11-24T08:31:00Z"),
            "2026-11-24T10:30:00.000Z"
        );
        // Month rollover, year rollover, 29 February.
        assert_eq!(
            next("0 0 1 * *", "2026-11-24T00:00:00Z"),
            "2026-12-01T00:00:00.000Z"
        );
        assert_eq!(
            next("@yearly", "2026-11-24T00:00:00Z"),
            "2027-01-01T00:00:00.000Z"
        );
        assert_eq!(
            next("0 0 29 feb *", "2026-11-24T00:00:00Z"),
            "2028-02-29T00:00:00.000Z"
        );
        // 2026-11-24 is a Tuesday.
        assert_eq!(
            next("0 12 * * mon", "2026-11-24T00:00:00Z"),
            "2026-11-30T12:00:00.000Z"
        );
        assert_eq!(
            next("0 12 * * 7", "2026-11-24T00:00:00Z"),
            "2026-11-29T12:00:00.000Z"
        );
        assert_eq!(
            next("0 12 * * 1-5", "2026-11-28T00:00:00Z"),
            "2026-11-30T12:00:00.000Z"
        );
        // Day-of-month or day-of-week when both are restricted.
        assert_eq!(
            next("0 0 1 * fri", "2026-11-24T00:00:00Z"),
            "2026-11-27T00:00:00.000Z"
        );
        assert_eq!(Schedule::parse("0 0 30 2 *").unwrap().next_after(0), None);
    }

    #[test]
    fn a_bad_schedule_names_its_field() {
        for (s, field) in [
            ("60 * * * *", "minute"),
            ("* 24 * * *", "hour"),
            ("* * 0 * *", "day-of-month"),
            ("* * * foo *", "month"),
            ("* * * * 8", "day-of-week"),
            ("*/0 * * * *", "minute"),
            ("5-1 * * * *", "minute"),
        ] {
            match Schedule::parse(s) {
                Err(ScheduleError::Field { field: f, .. }) => assert_eq!(f, field, "{s}"),
                other => panic!("{s}: {other:?}"),
            }
        }
        assert!(matches!(
            Schedule::parse("* * * *"),
            Err(ScheduleError::Fields(_))
        ));
        assert!(
            Schedule::parse("0 0 * * * *").is_err(),
            "six fields (seconds) are refused"
        );
    }
}
