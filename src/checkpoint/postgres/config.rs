//! A PostgreSQL URL as Planwright reads it: libpq's connection string plus pool, retry and TLS
//! options, turned into a `deadpool-postgres` pool that other PostgreSQL tables (runs, store) can
//! share. See `docs/checkpoints.md` for the full list of options.
//!
//! Planwright's own query parameters are taken out before the rest goes to `tokio-postgres`:
//!
//! | parameter | default | meaning |
//! |---|---|---|
//! | `pool_size` | 16 | the process's connection budget for this database: the pool holds `pool_size - 1` (1 when `pool_size=1`), the run event log's `LISTEN` connection the last one (see [`budget`](super::budget)) |
//! | `pool_timeout` | 30s | how long a request waits for a free connection |
//! | `connect_timeout` | 5s | how long opening one connection may take |
//! | `retry_for` | 30s | how long an operation keeps retrying while the database is unreachable (`0`: never) |
//! | `op_timeout` | 60s | one attempt of an operation gets no answer this long: the connection is given up and the operation retried |
//! | `recycle` | `verified` | health check when a pooled connection is reused: `verified` (a round trip, so a dead or stalled connection is replaced before use) or `fast` (only "is it closed?") |
//! | `sslmode` | `prefer` (`disable` on loopback) | `disable`, `prefer`, `require`, `verify-ca`, `verify-full` (libpq's meanings) |
//! | `sslrootcert` | system roots | a PEM file of extra trusted roots |
//!
//! Without `sslmode`, a server on a loopback address (`127.x`, `::1`, `localhost`, a Unix socket)
//! is reached in plain text, since TLS there protects nothing and setting it up costs 50–100 ms
//! at startup (native-tls loads the system's certificate store); any other host gets libpq's
//! default, `prefer`.
//!
//! Durations are `500ms`, `5s`, `2m`, or a bare number of seconds. A malformed URL or option is
//! [`CheckpointError::BadUrl`] (the CLIs exit 2).

use super::super::retention::parse_duration;
use super::super::CheckpointError;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use std::str::FromStr;
use std::time::Duration;

/// Planwright's own options, taken out of the URL before the rest reaches `tokio-postgres`.
pub const OWN_OPTIONS: [&str; 9] = [
    "pool_size",
    "pool_timeout",
    "connect_timeout",
    "idle_tx_timeout",
    "retry_for",
    "op_timeout",
    "recycle",
    "sslmode",
    "sslrootcert",
];

/// The libpq connection options `tokio-postgres` reads (in a key-value string; in a URL, the
/// user, host, port and database usually come before the `?`).
pub const CONNECTION_OPTIONS: [&str; 17] = [
    "user",
    "password",
    "dbname",
    "host",
    "hostaddr",
    "port",
    "options",
    "application_name",
    "sslnegotiation",
    "tcp_user_timeout",
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_retries",
    "target_session_attrs",
    "channel_binding",
    "load_balance_hosts",
];

/// The refusal of an option nobody reads: it names the option and lists the known ones (a typo
/// such as `pool_sise` must not pass for a connection problem).
fn unknown_option(key: &str) -> String {
    format!(
        "unknown option `{key}`; Planwright's options are {}, and PostgreSQL's connection options \
         are {}",
        OWN_OPTIONS.join(", "),
        CONNECTION_OPTIONS.join(", ")
    )
}

/// Which TLS a connection uses, as libpq's `sslmode` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SslMode {
    /// Never TLS.
    Disable,
    /// TLS when the server offers it, certificates not verified; plain otherwise.
    Prefer,
    /// TLS always, certificates not verified.
    Require,
    /// TLS always, the certificate chain verified, the host name not.
    VerifyCa,
    /// TLS always, the certificate chain and the host name verified.
    VerifyFull,
}

/// Everything a PostgreSQL URL configures.
#[derive(Clone, Debug)]
pub struct PgConfig {
    /// The connection itself (host, user, database, `application_name`, ...).
    pub pg: tokio_postgres::Config,
    /// The process's connection budget for this database (the pool holds
    /// [`pooled_connections`](Self::pooled_connections) of them).
    pub pool_size: usize,
    /// Wait for a free connection at most this long.
    pub pool_timeout: Duration,
    /// Opening one connection takes at most this long.
    pub connect_timeout: Duration,
    /// Keep retrying an operation this long while the database is unreachable.
    pub retry_for: Duration,
    /// One attempt of an operation waits this long for an answer.
    pub op_timeout: Duration,
    /// Run a round trip before reusing a pooled connection.
    pub verified_recycle: bool,
    /// The server aborts a transaction left idle this long (`idle_in_transaction_session_timeout`):
    /// a process frozen in the middle of a write (SIGSTOP, a VM paused) must not hold the rows
    /// it locked — a thread another replica takes over — for ever.
    pub idle_tx_timeout: Duration,
    /// TLS.
    pub sslmode: SslMode,
    /// Extra trusted root certificates (PEM file).
    pub sslrootcert: Option<std::path::PathBuf>,
}

impl PgConfig {
    /// Reads a `postgres://…` URL or a libpq `host=… key=value` string.
    pub fn from_url(url: &str) -> Result<Self, CheckpointError> {
        let bad = |reason: String| CheckpointError::BadUrl {
            url: url.to_string(),
            reason,
        };
        let mut cfg = PgConfig {
            pg: tokio_postgres::Config::new(),
            pool_size: 16,
            pool_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            idle_tx_timeout: Duration::from_secs(10),
            retry_for: Duration::from_secs(30),
            op_timeout: Duration::from_secs(60),
            verified_recycle: true,
            sslmode: SslMode::Prefer,
            sslrootcert: None,
        };
        let mut sslmode_given = false;
        let mut take = |key: &str, value: &str| -> Result<bool, CheckpointError> {
            let dur = || {
                parse_duration(value).ok_or_else(|| {
                    bad(format!(
                        "`{key}={value}` is not a duration (e.g. 500ms, 5s, 2m)"
                    ))
                })
            };
            match key {
                "pool_size" => {
                    cfg.pool_size = value
                        .parse()
                        .ok()
                        .filter(|n| (1..=10_000).contains(n))
                        .ok_or_else(|| bad(format!("`pool_size={value}`: give 1 to 10000")))?
                }
                "pool_timeout" => cfg.pool_timeout = dur()?,
                "connect_timeout" => cfg.connect_timeout = dur()?,
                "idle_tx_timeout" => cfg.idle_tx_timeout = dur()?,
                "retry_for" => cfg.retry_for = dur()?,
                "op_timeout" => cfg.op_timeout = dur()?.max(Duration::from_millis(1)),
                "recycle" => {
                    cfg.verified_recycle = match value {
                        "fast" => false,
                        "verified" => true,
                        _ => return Err(bad(format!("`recycle={value}`: use fast or verified"))),
                    }
                }
                "sslmode" => {
                    sslmode_given = true;
                    cfg.sslmode = match value {
                        "disable" => SslMode::Disable,
                        "prefer" | "allow" => SslMode::Prefer,
                        "require" => SslMode::Require,
                        "verify-ca" => SslMode::VerifyCa,
                        "verify-full" => SslMode::VerifyFull,
                        _ => {
                            return Err(bad(format!(
                        "`sslmode={value}`: use disable, prefer, require, verify-ca or verify-full"
                    )))
                        }
                    }
                }
                "sslrootcert" => cfg.sslrootcert = Some(value.into()),
                _ if CONNECTION_OPTIONS.contains(&key) => return Ok(false),
                _ => return Err(bad(unknown_option(key))),
            }
            Ok(true)
        };
        // Take our options out; hand the rest to tokio-postgres.
        let rest = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            match url.split_once('?') {
                None => url.to_string(),
                Some((base, query)) => {
                    let mut kept = Vec::new();
                    for pair in query.split('&').filter(|p| !p.is_empty()) {
                        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                        if !take(k, v)? {
                            kept.push(pair);
                        }
                    }
                    if kept.is_empty() {
                        base.to_string()
                    } else {
                        format!("{base}?{}", kept.join("&"))
                    }
                }
            }
        } else {
            let mut kept = Vec::new();
            for pair in url.split_whitespace() {
                let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                if !take(k, v)? {
                    kept.push(pair);
                }
            }
            kept.join(" ")
        };
        cfg.pg = tokio_postgres::Config::from_str(&rest).map_err(|e| bad(e.to_string()))?;
        if cfg.pg.get_hosts().is_empty() {
            return Err(bad("no host given".into()));
        }
        if !sslmode_given && cfg.pg.get_hosts().iter().all(is_loopback) {
            cfg.sslmode = SslMode::Disable;
        }
        cfg.pg.connect_timeout(cfg.connect_timeout);
        let idle = format!(
            "-c idle_in_transaction_session_timeout={}",
            cfg.idle_tx_timeout.as_millis().max(1)
        );
        let options = match cfg.pg.get_options() {
            Some(o) if !o.trim().is_empty() => format!("{o} {idle}"),
            _ => idle,
        };
        cfg.pg.options(&options);
        cfg.pg.ssl_mode(match cfg.sslmode {
            SslMode::Disable => tokio_postgres::config::SslMode::Disable,
            SslMode::Prefer => tokio_postgres::config::SslMode::Prefer,
            _ => tokio_postgres::config::SslMode::Require,
        });
        if cfg.pg.get_application_name().is_none() {
            cfg.pg.application_name("planwright");
        }
        Ok(cfg)
    }

    /// The TLS connector `sslmode` asks for.
    pub(crate) fn tls(&self) -> Result<postgres_native_tls::MakeTlsConnector, CheckpointError> {
        let mut b = native_tls::TlsConnector::builder();
        match self.sslmode {
            SslMode::Disable | SslMode::Prefer | SslMode::Require => {
                // Nothing is verified, so the system's roots need not be loaded (which costs
                // 50–100 ms at startup).
                b.danger_accept_invalid_certs(true);
                b.danger_accept_invalid_hostnames(true);
                b.disable_built_in_roots(true);
            }
            SslMode::VerifyCa => {
                b.danger_accept_invalid_hostnames(true);
            }
            SslMode::VerifyFull => {}
        }
        if let Some(path) = &self.sslrootcert {
            let pem = std::fs::read(path).map_err(|e| {
                CheckpointError::backend(format!("sslrootcert {}", path.display()), e)
            })?;
            let cert = native_tls::Certificate::from_pem(&pem).map_err(|e| {
                CheckpointError::backend(format!("sslrootcert {}", path.display()), e)
            })?;
            b.add_root_certificate(cert);
        }
        let connector = b
            .build()
            .map_err(|e| CheckpointError::backend("cannot set up TLS", e))?;
        Ok(postgres_native_tls::MakeTlsConnector::new(connector))
    }

    /// The most connections the pool holds: `pool_size - 1`, the budget's last connection kept
    /// for the run event log's `LISTEN` connection ([`budget`](super::budget)); 1 when
    /// `pool_size` is 1 (then nothing may `LISTEN`).
    pub fn pooled_connections(&self) -> usize {
        self.pool_size.saturating_sub(1).max(1)
    }

    /// A pool of [`pooled_connections`](Self::pooled_connections) connections as configured.
    /// No connection is opened yet.
    pub fn pool(&self) -> Result<Pool, CheckpointError> {
        let recycling_method = if self.verified_recycle {
            RecyclingMethod::Verified
        } else {
            RecyclingMethod::Fast
        };
        let config = ManagerConfig { recycling_method };
        let manager = if self.sslmode == SslMode::Disable {
            Manager::from_config(self.pg.clone(), tokio_postgres::NoTls, config)
        } else {
            Manager::from_config(self.pg.clone(), self.tls()?, config)
        };
        Pool::builder(manager)
            .max_size(self.pooled_connections())
            .wait_timeout(Some(self.pool_timeout))
            .create_timeout(Some(self.connect_timeout))
            .recycle_timeout(Some(self.connect_timeout))
            .runtime(Runtime::Tokio1)
            .build()
            .map_err(|e| CheckpointError::backend("cannot build the PostgreSQL pool", e))
    }
}

/// Whether a host is this machine (where TLS protects nothing).
fn is_loopback(h: &tokio_postgres::config::Host) -> bool {
    match h {
        tokio_postgres::config::Host::Tcp(name) => {
            name == "localhost"
                || name
                    .trim_matches(|c| c == '[' || c == ']')
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback())
        }
        #[allow(unreachable_patterns)]
        _ => true, // a Unix socket
    }
}

/// A connection pool for `url` (see the module docs for the options), for any PostgreSQL tables
/// of Planwright, without asking the server for room ([`SharedPool::open`](super::SharedPool::open)
/// does, and is what the checkpointer, the run records and the store open).
pub fn pool_from_url(url: &str) -> Result<Pool, CheckpointError> {
    PgConfig::from_url(url)?.pool()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_options_are_taken_out_and_the_rest_reaches_tokio_postgres() {
        let c = PgConfig::from_url(
            "postgres://u@h:5433/db?pool_size=3&connect_timeout=250ms&application_name=x&retry_for=2m&sslmode=verify-full",
        )
        .unwrap();
        assert_eq!(c.pool_size, 3);
        assert_eq!(c.connect_timeout, Duration::from_millis(250));
        assert_eq!(c.retry_for, Duration::from_secs(120));
        assert_eq!(c.sslmode, SslMode::VerifyFull);
        assert_eq!(c.pg.get_application_name(), Some("x"));
        assert_eq!(c.pg.get_dbname(), Some("db"));
        let kv = PgConfig::from_url("host=h user=u pool_size=2 sslmode=disable").unwrap();
        assert_eq!((kv.pool_size, kv.sslmode), (2, SslMode::Disable));
        assert_eq!(
            PgConfig::from_url("postgres://u@127.0.0.1/db")
                .unwrap()
                .sslmode,
            SslMode::Disable,
            "loopback defaults to plain text"
        );
        assert_eq!(
            PgConfig::from_url("postgres://u@db.example/db")
                .unwrap()
                .sslmode,
            SslMode::Prefer
        );
        let plain = PgConfig::from_url("postgres://u@h/db?pool_size=1&sslmode=disable").unwrap();
        assert_eq!(
            plain.pg.get_ssl_mode(),
            tokio_postgres::config::SslMode::Disable
        );
    }

    #[test]
    fn malformed_urls_and_options_are_bad_urls_naming_the_problem() {
        for (url, says) in [
            ("postgres://u@h/db?pool_size=0", "pool_size"),
            ("postgres://u@h/db?connect_timeout=soon", "connect_timeout"),
            ("postgres://u@h/db?sslmode=maybe", "sslmode"),
            ("postgres://u@h:notaport/db", "invalid"),
            (
                "postgres://u@h/db?unknown_option=1",
                "unknown option `unknown_option`",
            ),
        ] {
            let err = PgConfig::from_url(url).unwrap_err();
            assert!(
                matches!(err, CheckpointError::BadUrl { .. }),
                "{url}: {err}"
            );
            assert!(err.to_string().contains(says), "{url}: {err}");
        }
    }

    #[test]
    fn a_misspelt_option_is_named_with_the_known_ones() {
        for url in [
            "postgres://u@127.0.0.1/test?pool_sise=4",
            "postgres://u@127.0.0.1/test?application_name=x&pool_sise=4",
            "host=127.0.0.1 user=u pool_sise=4",
        ] {
            let err = PgConfig::from_url(url).unwrap_err().to_string();
            assert!(err.contains("unknown option `pool_sise`"), "{url}: {err}");
            for known in [
                "pool_size",
                "retry_for",
                "sslmode",
                "application_name",
                "port",
            ] {
                assert!(err.contains(known), "{url}: {err} does not list `{known}`");
            }
        }
        // Every option listed as known is accepted.
        for key in OWN_OPTIONS.iter().chain(&CONNECTION_OPTIONS) {
            let value = match *key {
                "pool_size" | "port" | "keepalives_retries" => "2",
                "recycle" => "fast",
                "sslmode" => "disable",
                "sslnegotiation" => "postgres",
                "keepalives" => "1",
                "target_session_attrs" => "any",
                "channel_binding" => "prefer",
                "load_balance_hosts" => "disable",
                "host" | "hostaddr" => "127.0.0.1",
                "sslrootcert" | "user" | "password" | "dbname" | "application_name" => "x",
                "options" => "-cstatement_timeout=1000",
                _ => "5",
            };
            let url = format!("postgres://u@127.0.0.1/test?{key}={value}");
            PgConfig::from_url(&url).unwrap_or_else(|e| panic!("{url}: {e}"));
        }
    }
}
