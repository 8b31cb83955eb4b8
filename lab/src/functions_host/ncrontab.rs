//! A timer trigger's schedule: the host's 6-field NCRONTAB expression
//! (`{second} {minute} {hour} {day} {month} {day-of-week}`), evaluated in UTC.
//!
//! The occurrences come from the `cron` crate. Its day-of-week numbers differ from
//! NCRONTAB's (it counts Sunday as 1, NCRONTAB as 0: see
//! `tests/fixtures/platform/functions_host.json`), so numeric days of the week are
//! rewritten to their names before the crate sees them; names mean the same to both.

use std::fmt;
use std::str::FromStr;

use stormgate_shared::clock::EpochMillis;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error(
        "an NCRONTAB schedule has 6 fields (second minute hour day month day-of-week), found {0}"
    )]
    FieldCount(usize),
    #[error("day-of-week {0:?} is not 0-6 (Sunday is 0) or a day name")]
    DayOfWeek(String),
    #[error("{0}")]
    Expression(String),
}

/// A parsed 6-field schedule.
#[derive(Debug, Clone)]
pub struct NcrontabSchedule {
    text: String,
    schedule: cron::Schedule,
}

impl PartialEq for NcrontabSchedule {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl fmt::Display for NcrontabSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

const DAY_NAMES: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];

impl FromStr for NcrontabSchedule {
    type Err = ScheduleError;

    fn from_str(text: &str) -> Result<Self, ScheduleError> {
        let fields: Vec<&str> = text.split_whitespace().collect();
        if fields.len() != 6 {
            return Err(ScheduleError::FieldCount(fields.len()));
        }
        let day_of_week = day_names(fields[5])?;
        let expression = format!("{} {day_of_week}", fields[..5].join(" "));
        let schedule = cron::Schedule::from_str(&expression)
            .map_err(|e| ScheduleError::Expression(e.to_string()))?;
        Ok(NcrontabSchedule {
            text: fields.join(" "),
            schedule,
        })
    }
}

/// NCRONTAB's day-of-week field with every number (0 = Sunday .. 6 = Saturday) written
/// as its name. A step (`*/2`, `1-5/2`) is kept only on `*`, whose meaning is the same.
fn day_names(field: &str) -> Result<String, ScheduleError> {
    let bad = || ScheduleError::DayOfWeek(field.to_owned());
    let name = |part: &str| -> Result<String, ScheduleError> {
        match part.parse::<usize>() {
            Ok(n) => DAY_NAMES.get(n).map(|d| (*d).to_owned()).ok_or_else(bad),
            Err(_) if part.chars().all(|c| c.is_ascii_alphabetic()) && !part.is_empty() => {
                Ok(part.to_owned())
            }
            Err(_) => Err(bad()),
        }
    };
    field
        .split(',')
        .map(|item| {
            if item == "*" || item == "?" {
                return Ok(item.to_owned());
            }
            if let Some(step) = item.strip_prefix("*/") {
                step.parse::<u32>().map_err(|_| bad())?;
                return Ok(item.to_owned());
            }
            match item.split_once('-') {
                Some((from, to)) => Ok(format!("{}-{}", name(from)?, name(to)?)),
                None => name(item),
            }
        })
        .collect::<Result<Vec<_>, _>>()
        .map(|items| items.join(","))
}

impl NcrontabSchedule {
    /// The first occurrence strictly after `after` (UTC), if the schedule has one.
    pub fn next_after(&self, after: EpochMillis) -> Option<EpochMillis> {
        let millis = i64::try_from(after.0).ok()?;
        let at = chrono::DateTime::<chrono::Utc>::from_timestamp_millis(millis)?;
        let next = self.schedule.after(&at).next()?;
        u64::try_from(next.timestamp_millis()).ok().map(EpochMillis)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> EpochMillis {
        let ts: jiff::Timestamp = text.parse().unwrap();
        EpochMillis(ts.as_millisecond() as u64)
    }

    fn next(schedule: &str, after: &str) -> String {
        let s: NcrontabSchedule = schedule.parse().unwrap();
        let n = s.next_after(at(after)).unwrap();
        jiff::Timestamp::from_millisecond(n.0 as i64)
            .unwrap()
            .to_string()
    }

    #[test]
    fn dispatch_s_schedule_fires_every_five_seconds_on_the_boundary() {
        assert_eq!(
            next("*/5 * * * * *", "2026-01-12T06:00:00Z"),
            "2026-01-12T06:00:05Z"
        );
        assert_eq!(
            next("*/5 * * * * *", "2026-01-12T06:00:03.250Z"),
            "2026-01-12T06:00:05Z"
        );
        assert_eq!(
            next("0 * * * * *", "2026-01-12T06:00:00Z"),
            "2026-01-12T06:01:00Z"
        );
    }

    #[test]
    fn day_of_week_numbers_are_ncrontab_s_sunday_zero() {
        // 2026-01-12 is a Monday.
        assert_eq!(
            next("0 0 9 * * 0", "2026-01-12T00:00:00Z"),
            "2026-01-18T09:00:00Z"
        );
        assert_eq!(
            next("0 0 9 * * 1-5", "2026-01-10T00:00:00Z"),
            "2026-01-12T09:00:00Z"
        );
        assert_eq!(
            next("0 0 9 * * 6", "2026-01-12T00:00:00Z"),
            "2026-01-17T09:00:00Z"
        );
        assert_eq!(
            next("0 0 9 * * Sun", "2026-01-12T00:00:00Z"),
            "2026-01-18T09:00:00Z"
        );
    }

    #[test]
    fn schedules_the_host_refuses_are_refused() {
        for bad in [
            "*/5 * * * *",
            "* * * * * * *",
            "0 0 9 * * 7",
            "0 0 9 * * x-1",
            "0 0 9 * * 1/2",
            "",
        ] {
            assert!(bad.parse::<NcrontabSchedule>().is_err(), "{bad}");
        }
    }
}
