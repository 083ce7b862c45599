//! One connection budget per process and database: a URL's `pool_size` is the most connections
//! the process holds to that database, whatever opens it. The checkpointer, the run records, the
//! run event log and the store of one process share one [`SharedPool`] (through
//! [`PgPools`](crate::checkpoint::PgPools)); the run event log's `LISTEN` connection, which
//! cannot be a pooled one (it must stay open and hear notifications), is the budget's last
//! connection, so the pool itself holds at most `pool_size - 1` (see
//! [`PgConfig::pooled_connections`]). A replica therefore holds at most `pool_size` connections,
//! and `max_connections - superuser_reserved_connections` divided by `pool_size` replicas fit on
//! one server (docs/deployment.md has the arithmetic).
//!
//! When a pool is opened, the server is asked how many connections are left
//! ([`check_room`]: `max_connections`, `superuser_reserved_connections`, the connections open
//! now, and the role's and the database's `CONNECTION LIMIT`), and a process whose budget does
//! not fit is refused at once with the numbers, instead of failing on the first busy moment (or
//! retrying 53300 "too many clients" for `retry_for` at startup). The check sees the connections
//! other processes hold now, not the budgets they may grow to: processes starting together can
//! still overcommit, which the arithmetic in docs/deployment.md is for.

use super::config::PgConfig;
use super::retry::{with_retry_bounded, Attempt};
use super::CheckpointError;
use deadpool_postgres::{Pool, PoolError};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio_postgres::error::SqlState;

/// A pool and its URL's settings, shared by everything one process opens on that URL.
#[derive(Clone)]
pub struct SharedPool {
    inner: Arc<Inner>,
}

struct Inner {
    url: String,
    pool: Pool,
    cfg: PgConfig,
    /// The budget's connection outside the pool is taken (by a `LISTEN` connection).
    listening: AtomicBool,
}

impl SharedPool {
    /// Builds the pool `url` describes and checks that the server has room for its whole budget
    /// ([`check_room`]; waiting up to `retry_for` for an unreachable server). A malformed URL is
    /// [`CheckpointError::BadUrl`]; too few free connections a [`CheckpointError::Database`] with
    /// SQLSTATE 53300 whose message names the numbers ([`NoRoom`]).
    pub async fn open(url: &str) -> Result<Self, CheckpointError> {
        let cfg = PgConfig::from_url(url)?;
        let pool = cfg.pool()?;
        check_room(&pool, &cfg).await?;
        Ok(Self {
            inner: Arc::new(Inner {
                url: url.to_string(),
                pool,
                cfg,
                listening: AtomicBool::new(false),
            }),
        })
    }

    /// The pool (a handle on the shared one).
    pub fn pool(&self) -> Pool {
        self.inner.pool.clone()
    }

    /// The URL's settings (timeouts, retries, TLS, the connection itself).
    pub fn config(&self) -> &PgConfig {
        &self.inner.cfg
    }

    /// Takes the budget's connection outside the pool, for a connection that must stay open on
    /// its own (the run event log's `LISTEN`); given back when the guard is dropped. Refused
    /// (as [`CheckpointError::BadUrl`]) with `pool_size=1`, whose single connection is the
    /// pool's, and when another holder has it.
    pub fn take_listener_slot(&self) -> Result<ListenerSlot, CheckpointError> {
        let bad = |reason: String| CheckpointError::BadUrl {
            url: self.inner.url.clone(),
            reason,
        };
        if self.inner.cfg.pool_size < 2 {
            return Err(bad(
                "`pool_size=1` leaves no connection for the run event log's LISTEN connection \
                 beside the pool: give pool_size=2 or more (the budget counts both)"
                    .into(),
            ));
        }
        if self.inner.listening.swap(true, Ordering::AcqRel) {
            return Err(bad(
                "this process already keeps a LISTEN connection on this URL".into(),
            ));
        }
        Ok(ListenerSlot {
            shared: self.clone(),
        })
    }
}

/// The budget's connection outside the pool, held (see [`SharedPool::take_listener_slot`]).
pub struct ListenerSlot {
    shared: SharedPool,
}

impl Drop for ListenerSlot {
    fn drop(&mut self) {
        self.shared.inner.listening.store(false, Ordering::Release);
    }
}

/// Too few connections are left on the server for a process's budget: each variant names the
/// limit that is short and its numbers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoRoom {
    /// The server's `max_connections`, less the reserved ones and those open now.
    #[error(
        "PostgreSQL has room for {free} more connections (max_connections {max_connections} - \
         superuser_reserved_connections {superuser_reserved}{} - {others} open by other clients), \
         but this process's budget is pool_size={budget}: lower pool_size in the URL, run fewer \
         replicas, or raise max_connections (connections per replica = pool_size; see \
         docs/deployment.md)",
        reserved_part(*.reserved)
    )]
    Server {
        /// This process's budget (`pool_size`).
        budget: i64,
        /// Connections this process may still open.
        free: i64,
        /// `max_connections`.
        max_connections: i64,
        /// `superuser_reserved_connections` (kept for administrators, whatever the role).
        superuser_reserved: i64,
        /// `reserved_connections` (PostgreSQL 16 and later; 0 before).
        reserved: i64,
        /// Client connections open now, other than this process's first.
        others: i64,
    },
    /// The role's `CONNECTION LIMIT`, less its connections open now.
    #[error(
        "role `{role}` has CONNECTION LIMIT {limit} and {others} connections open elsewhere: room \
         for {free} more, but this process's budget is pool_size={budget}: lower pool_size in \
         the URL or raise the limit (ALTER ROLE … CONNECTION LIMIT)"
    )]
    Role {
        /// This process's budget (`pool_size`).
        budget: i64,
        /// Connections this process may still open.
        free: i64,
        /// The role.
        role: String,
        /// Its `CONNECTION LIMIT`.
        limit: i64,
        /// Its connections open now, other than this process's first.
        others: i64,
    },
    /// The database's `CONNECTION LIMIT`, less its connections open now.
    #[error(
        "database `{database}` has CONNECTION LIMIT {limit} and {others} connections open \
         elsewhere: room for {free} more, but this process's budget is pool_size={budget}: \
         lower pool_size in the URL or raise the limit (ALTER DATABASE … CONNECTION LIMIT)"
    )]
    Database {
        /// This process's budget (`pool_size`).
        budget: i64,
        /// Connections this process may still open.
        free: i64,
        /// The database.
        database: String,
        /// Its `CONNECTION LIMIT`.
        limit: i64,
        /// Its connections open now, other than this process's first.
        others: i64,
    },
    /// Not even the first connection was accepted (53300 "too many clients").
    #[error(
        "PostgreSQL refused this process's first connection ({reason}): no connection is left \
         for its budget of pool_size={budget}; lower pool_size in the URL, run fewer replicas, \
         or raise max_connections (see docs/deployment.md)"
    )]
    Refused {
        /// This process's budget (`pool_size`).
        budget: i64,
        /// The server's message.
        reason: String,
    },
}

fn reserved_part(reserved: i64) -> String {
    if reserved > 0 {
        format!(" - reserved_connections {reserved}")
    } else {
        String::new()
    }
}

impl From<NoRoom> for CheckpointError {
    fn from(e: NoRoom) -> Self {
        CheckpointError::Database {
            backend: "postgres",
            code: Some(SqlState::TOO_MANY_CONNECTIONS.code().to_string()),
            message: e.to_string(),
            source: Box::new(e),
        }
    }
}

/// What the server says about its connections, as seen from one of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Room {
    /// `max_connections`.
    pub max_connections: i64,
    /// `superuser_reserved_connections`.
    pub superuser_reserved: i64,
    /// `reserved_connections` (0 before PostgreSQL 16).
    pub reserved: i64,
    /// Client connections open, the asking one included.
    pub open: i64,
    /// The role connected as.
    pub role: String,
    /// Whether it is a superuser (role and database limits do not apply to it).
    pub superuser: bool,
    /// The role's `CONNECTION LIMIT` (-1: none).
    pub role_limit: i64,
    /// The role's connections open, the asking one included.
    pub role_open: i64,
    /// The database.
    pub database: String,
    /// The database's `CONNECTION LIMIT` (-1: none).
    pub database_limit: i64,
    /// The database's connections open, the asking one included.
    pub database_open: i64,
}

impl Room {
    /// Whether `budget` connections fit (the asking one among them), and if not, why.
    pub fn fits(&self, budget: i64) -> Result<(), NoRoom> {
        let others = self.open - 1;
        let free = self.max_connections - self.superuser_reserved - self.reserved - others;
        if budget > free {
            return Err(NoRoom::Server {
                budget,
                free: free.max(0),
                max_connections: self.max_connections,
                superuser_reserved: self.superuser_reserved,
                reserved: self.reserved,
                others,
            });
        }
        if self.superuser {
            return Ok(());
        }
        if self.role_limit >= 0 {
            let others = self.role_open - 1;
            let free = self.role_limit - others;
            if budget > free {
                return Err(NoRoom::Role {
                    budget,
                    free: free.max(0),
                    role: self.role.clone(),
                    limit: self.role_limit,
                    others,
                });
            }
        }
        if self.database_limit >= 0 {
            let others = self.database_open - 1;
            let free = self.database_limit - others;
            if budget > free {
                return Err(NoRoom::Database {
                    budget,
                    free: free.max(0),
                    database: self.database.clone(),
                    limit: self.database_limit,
                    others,
                });
            }
        }
        Ok(())
    }
}

/// Client connections only: background workers and autovacuum have slots of their own.
const ROOM_SQL: &str = "
SELECT current_setting('max_connections')::int8,
       current_setting('superuser_reserved_connections')::int8,
       coalesce(current_setting('reserved_connections', true), '0')::int8,
       (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'),
       r.rolname::text, r.rolsuper, r.rolconnlimit::int8,
       (SELECT count(*) FROM pg_stat_activity
         WHERE backend_type = 'client backend' AND usesysid = r.oid),
       d.datname::text, d.datconnlimit::int8,
       (SELECT count(*) FROM pg_stat_activity
         WHERE backend_type = 'client backend' AND datid = d.oid)
FROM pg_roles r, pg_database d
WHERE r.rolname = current_user AND d.datname = current_database()";

/// Asks the server, on one of `pool`'s connections (kept in the pool), whether `cfg.pool_size`
/// connections fit; refuses with [`NoRoom`] (as a 53300 [`CheckpointError::Database`]) when
/// they do not, or when the server refuses even that connection as one too many. An unreachable
/// server is waited for, as every operation does, up to `retry_for`.
pub async fn check_room(pool: &Pool, cfg: &PgConfig) -> Result<(), CheckpointError> {
    let budget = cfg.pool_size as i64;
    let room = with_retry_bounded(
        "check free connections",
        cfg.retry_for,
        cfg.op_timeout,
        |_| async move {
            let client = match pool.get().await {
                Ok(c) => c,
                Err(PoolError::Backend(e)) if e.code() == Some(&SqlState::TOO_MANY_CONNECTIONS) => {
                    let reason = e
                        .as_db_error()
                        .map(|d| d.message().to_string())
                        .unwrap_or_else(|| e.to_string());
                    return Err(Attempt::Fail(NoRoom::Refused { budget, reason }.into()));
                }
                Err(e) => return Err(e.into()),
            };
            let row = client.query_one(ROOM_SQL, &[]).await?;
            Ok(Room {
                max_connections: row.get(0),
                superuser_reserved: row.get(1),
                reserved: row.get(2),
                open: row.get(3),
                role: row.get(4),
                superuser: row.get(5),
                role_limit: row.get(6),
                role_open: row.get(7),
                database: row.get(8),
                database_limit: row.get(9),
                database_open: row.get(10),
            })
        },
    )
    .await?;
    room.fits(budget).map_err(|e| {
        tracing::error!(error = %e, "not enough free PostgreSQL connections for this process");
        e.into()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn room() -> Room {
        Room {
            max_connections: 100,
            superuser_reserved: 3,
            reserved: 0,
            open: 1,
            role: "planwright".into(),
            superuser: false,
            role_limit: -1,
            role_open: 1,
            database: "app".into(),
            database_limit: -1,
            database_open: 1,
        }
    }

    #[test]
    fn the_budget_fits_in_max_connections_less_the_reserved_and_the_others() {
        let mut r = room();
        assert_eq!(r.fits(97), Ok(()));
        r.open = 82; // 81 others: 100 - 3 - 81 = 16 left
        assert_eq!(r.fits(16), Ok(()));
        let err = r.fits(17).unwrap_err();
        assert_eq!(
            err,
            NoRoom::Server {
                budget: 17,
                free: 16,
                max_connections: 100,
                superuser_reserved: 3,
                reserved: 0,
                others: 81
            }
        );
        let msg = err.to_string();
        for says in [
            "room for 16",
            "max_connections 100",
            "superuser_reserved_connections 3",
            "81 open",
            "pool_size=17",
        ] {
            assert!(msg.contains(says), "{says}: {msg}");
        }
        assert!(!msg.contains("reserved_connections 0"), "{msg}");
        r.reserved = 5;
        assert!(r
            .fits(16)
            .unwrap_err()
            .to_string()
            .contains("- reserved_connections 5"));
    }

    #[test]
    fn role_and_database_limits_bind_everyone_but_superusers() {
        let mut r = room();
        r.role_limit = 10;
        r.role_open = 4;
        assert_eq!(r.fits(7), Ok(()));
        let msg = r.fits(8).unwrap_err().to_string();
        assert!(
            msg.contains("role `planwright` has CONNECTION LIMIT 10"),
            "{msg}"
        );
        assert!(msg.contains("room for 7"), "{msg}");
        r.role_limit = -1;
        r.database_limit = 2;
        let msg = r.fits(3).unwrap_err().to_string();
        assert!(
            msg.contains("database `app` has CONNECTION LIMIT 2"),
            "{msg}"
        );
        r.superuser = true;
        assert_eq!(r.fits(3), Ok(()));
    }

    #[test]
    fn the_refusal_is_a_53300_database_error_naming_the_numbers() {
        let e: CheckpointError = NoRoom::Refused {
            budget: 16,
            reason: "sorry, too many clients already".into(),
        }
        .into();
        let msg = e.to_string();
        assert!(msg.contains("53300"), "{msg}");
        assert!(msg.contains("too many clients already"), "{msg}");
        assert!(msg.contains("pool_size=16"), "{msg}");
    }
}
