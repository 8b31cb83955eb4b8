//! Reading app-setting values: [`AppSettings`] (empty means unset, table defaults, a
//! missing or malformed value named in the error) and the validators of single values
//! (endpoints, numbers, durations, the headroom, the log format).

use std::collections::HashMap;
use std::time::Duration;

use reqwest::Url;
use stormgate_shared::headroom::Headroom;

use super::error::ConfigError;
use super::settings::LogFormat;
use super::table::{ReadBy, SETTINGS, spec};
use crate::secrets::{self, Secret};

/// The app settings as given, with empty values treated as unset (Bicep writes `''` for
/// optional settings it does not use).
pub(super) struct AppSettings {
    values: HashMap<String, String>,
}

impl AppSettings {
    pub(super) fn new(values: HashMap<String, String>) -> Self {
        AppSettings { values }
    }

    pub(super) fn get(&self, name: &str) -> Option<&str> {
        self.values
            .get(name)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
    }

    pub(super) fn required(&self, name: &'static str) -> Result<&str, ConfigError> {
        self.get(name).ok_or_else(|| ConfigError::Missing {
            name,
            why: spec(name).map_or("required", |s| s.description).to_owned(),
        })
    }

    pub(super) fn required_because(
        &self,
        name: &'static str,
        why: &str,
    ) -> Result<&str, ConfigError> {
        self.get(name).ok_or_else(|| ConfigError::Missing {
            name,
            why: why.to_owned(),
        })
    }

    pub(super) fn secret(&self, name: &'static str, value: &str) -> Result<Secret, ConfigError> {
        if value.starts_with(secrets::KEY_VAULT_PREFIX) {
            return Err(ConfigError::Malformed {
                name,
                reason: "the keyvault: reference was not resolved".into(),
            });
        }
        Ok(Secret::new(value))
    }

    pub(super) fn required_secret(
        &self,
        name: &'static str,
        why: &str,
    ) -> Result<Secret, ConfigError> {
        self.secret(name, self.required_because(name, why)?)
    }

    /// Parses `name` with `parse`, or the table's default when unset.
    pub(super) fn parsed_or_default<T>(
        &self,
        name: &'static str,
        parse: impl Fn(&str) -> Result<T, String>,
    ) -> Result<T, ConfigError> {
        let default = spec(name).and_then(|s| s.default);
        let Some(raw) = self.get(name).or(default) else {
            return Err(ConfigError::Missing {
                name,
                why: "required".into(),
            });
        };
        parse(raw).map_err(|reason| ConfigError::Malformed { name, reason })
    }

    pub(super) fn parsed_optional<T>(
        &self,
        name: &'static str,
        parse: impl Fn(&str) -> Result<T, String>,
    ) -> Result<Option<T>, ConfigError> {
        self.get(name)
            .map(|raw| parse(raw).map_err(|reason| ConfigError::Malformed { name, reason }))
            .transpose()
    }
}

/// Values of handler settings that are literal Key Vault references reach us only when
/// App Service failed to resolve them: stop, naming the first such setting.
pub(super) fn reject_unresolved_references(settings: &AppSettings) -> Result<(), ConfigError> {
    for spec in SETTINGS.iter().filter(|s| s.read_by == ReadBy::Handler) {
        if settings
            .get(spec.name)
            .is_some_and(|v| v.starts_with("@Microsoft.KeyVault("))
        {
            return Err(ConfigError::UnresolvedKeyVaultReference { name: spec.name });
        }
    }
    Ok(())
}

/// A service endpoint: `https://` with a host, or plain `http://` to a loopback host (a
/// local simulator or test server on this machine; nothing leaves it in clear text).
pub(super) fn service_endpoint(name: &'static str, raw: &str) -> Result<String, ConfigError> {
    let url = Url::parse(raw).map_err(|e| ConfigError::Malformed {
        name,
        reason: format!("{:?} is not a URL: {e}", without_credentials(raw)),
    })?;
    let accepted = match (url.scheme(), url.host_str()) {
        ("https", Some(_)) => true,
        ("http", Some(host)) => is_loopback(host),
        _ => false,
    };
    if accepted {
        Ok(raw.to_owned())
    } else {
        Err(ConfigError::NotHttps {
            name,
            url: without_credentials(raw),
        })
    }
}

/// 127.0.0.0/8, ::1 and `localhost`: hosts whose traffic never leaves the machine.
fn is_loopback(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => bare.eq_ignore_ascii_case("localhost"),
    }
}

pub(super) fn https_url(raw: &str) -> Result<String, String> {
    let shown = without_credentials(raw);
    let url = Url::parse(raw).map_err(|e| format!("{shown:?} is not a URL: {e}"))?;
    if url.scheme() != "https" || url.host_str().is_none() {
        return Err(format!("{shown:?} must be an https:// URL with a host"));
    }
    Ok(raw.to_owned())
}

/// A URL as it may be quoted in an error: a user or password in it is replaced, because a
/// start-up error is printed where anyone reading the host's logs can see it.
fn without_credentials(raw: &str) -> String {
    match Url::parse(raw) {
        Ok(mut url) if !url.username().is_empty() || url.password().is_some() => {
            // Only fails for URLs that cannot have credentials, which these have.
            let _ = url.set_username("redacted");
            let _ = url.set_password(None);
            url.to_string()
        }
        Ok(_) => raw.to_owned(),
        Err(_) => match raw.rsplit_once('@') {
            Some((_, host)) => format!("<redacted>@{host}"),
            None => raw.to_owned(),
        },
    }
}

pub(super) fn positive_integer(raw: &str) -> Result<u64, String> {
    match raw.parse::<u64>() {
        Ok(0) => Err("must be greater than zero".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{raw:?} is not a whole number")),
    }
}

pub(super) fn non_negative_number(raw: &str) -> Result<f64, String> {
    match raw.parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
        _ => Err(format!("{raw:?} is not a non-negative number")),
    }
}

pub(super) fn headroom(raw: &str) -> Result<Headroom, String> {
    let fraction = raw
        .parse::<f64>()
        .map_err(|_| format!("{raw:?} is not a fraction"))?;
    Headroom::new(fraction).map_err(|e| e.to_string())
}

pub(super) fn probability(raw: &str) -> Result<f64, String> {
    match raw.parse::<f64>() {
        Ok(x) if x > 0.0 && x <= 1.0 => Ok(x),
        _ => Err(format!(
            "{raw:?} is not a probability above 0 and at most 1"
        )),
    }
}

pub(super) fn retention_days(raw: &str) -> Result<Duration, String> {
    match raw.trim().parse::<u64>() {
        Ok(days) if (1..=3650).contains(&days) => Ok(Duration::from_secs(days * 24 * 3600)),
        _ => Err(format!(
            "{raw:?} is not a whole number of days from 1 to 3650"
        )),
    }
}

pub(super) fn dead_letter_max(raw: &str) -> Result<u64, String> {
    match raw.trim().parse::<u64>() {
        Ok(n) if (100..=1_000_000).contains(&n) => Ok(n),
        _ => Err(format!("{raw:?} is not a count from 100 to 1000000")),
    }
}

pub(super) fn seconds(raw: &str) -> Result<Duration, String> {
    raw.trim()
        .parse::<u64>()
        .map(Duration::from_secs)
        .map_err(|_| format!("{raw:?} is not a whole number of seconds"))
}

pub(super) fn port(raw: &str) -> Result<u16, String> {
    raw.parse::<u16>()
        .map_err(|_| format!("{raw:?} is not a TCP port"))
}

pub(super) fn log_format(raw: &str) -> Result<LogFormat, String> {
    match raw {
        "json" => Ok(LogFormat::Json),
        "pretty" => Ok(LogFormat::Pretty),
        other => Err(format!("{other:?} is not `json` or `pretty`")),
    }
}
