//! The SQLite store: one table, `planwright_store`, in its own file or beside the checkpoints.
//! Every call runs on tokio's blocking pool, so a file lock held by another process never stalls
//! a worker thread. Prefix, owner, TTL, value filters, order and paging are all pushed into SQL
//! (filters with SQLite's `->` JSON operator), so a search reads only the page it returns.

use super::{
    check_item, check_prefix, dotted, system_clock, undotted, Index, Item, Namespace,
    NamespaceQuery, PutOptions, SearchQuery, Store, StoreClock, StoreError,
};
use async_trait::async_trait;
use rusqlite::types::Value as Sql;
use rusqlite::{params, Connection, OptionalExtension, Row};
use serde_json::{Map, Value};
use std::sync::{Arc, Mutex};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS planwright_store (
    namespace TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    expires_at INTEGER,
    ttl_ms INTEGER,
    owner TEXT,
    index_paths TEXT,
    PRIMARY KEY (namespace, key)
);
CREATE INDEX IF NOT EXISTS planwright_store_expires ON planwright_store (expires_at)
    WHERE expires_at IS NOT NULL;
";

const COLUMNS: &str =
    "namespace, key, value, created_at, updated_at, expires_at, owner, index_paths";

/// Adds the columns a table made by an older version lacks (SQLite has no `ADD COLUMN IF NOT
/// EXISTS`): `index_paths`, the item's [`Index`](super::Index) as JSON, NULL for the whole value.
/// Another process opening the same file may add the column first: then this one's `ALTER`
/// fails and the column is there, which is all that is asked.
fn upgrade(c: &Connection) -> rusqlite::Result<()> {
    let has = || -> rusqlite::Result<bool> {
        c.query_row(
            "SELECT EXISTS (SELECT 1 FROM pragma_table_info('planwright_store')
             WHERE name = 'index_paths')",
            [],
            |r| r.get(0),
        )
    };
    if has()? {
        return Ok(());
    }
    match c.execute_batch("ALTER TABLE planwright_store ADD COLUMN index_paths TEXT;") {
        Err(_) if has()? => Ok(()),
        other => other,
    }
}

/// A store in a SQLite file.
pub struct SqliteStore {
    conn: Arc<Mutex<Connection>>,
    clock: StoreClock,
}

fn be(op: &'static str) -> impl Fn(rusqlite::Error) -> StoreError {
    move |e| StoreError::backend(op, e)
}

impl SqliteStore {
    /// Opens (or creates) the store in the SQLite file at `path`, on the default clock.
    pub async fn open(path: String) -> Result<Self, StoreError> {
        Self::open_with_clock(path, system_clock()).await
    }

    /// Opens the store at `path` on `clock`.
    pub async fn open_with_clock(path: String, clock: StoreClock) -> Result<Self, StoreError> {
        let conn = tokio::task::spawn_blocking(move || {
            let c = crate::checkpoint::sqlite_side_connection(&path, SCHEMA)
                .map_err(|(op, e)| StoreError::Backend { op, source: e })?;
            upgrade(&c).map_err(be("upgrade table"))?;
            Ok::<_, StoreError>(c)
        })
        .await
        .map_err(|e| StoreError::backend("open", e))??;
        Ok(Self {
            conn: Arc::new(Mutex::new(conn)),
            clock,
        })
    }

    /// The live item (if `user` is given: only theirs), its TTL refreshed.
    async fn read(
        &self,
        namespace: &[String],
        key: &str,
        user: Option<String>,
    ) -> Result<Option<Item>, StoreError> {
        check_item(namespace, key)?;
        let now = (self.clock)() as i64;
        let (ns, k) = (dotted(namespace), key.to_string());
        self.with("get", move |c| {
            let tx = c.transaction().map_err(be("get"))?;
            tx.execute(
                "UPDATE planwright_store SET expires_at = ?3 + ttl_ms
                 WHERE namespace = ?1 AND key = ?2 AND ttl_ms IS NOT NULL AND expires_at > ?3
                   AND (?4 IS NULL OR owner = ?4)",
                params![ns, k, now, user],
            )
            .map_err(be("get"))?;
            let found = {
                let mut st = tx
                    .prepare(&format!(
                        "SELECT {COLUMNS} FROM planwright_store WHERE namespace = ?1 AND key = ?2
                         AND (expires_at IS NULL OR expires_at > ?3) AND (?4 IS NULL OR owner = ?4)"
                    ))
                    .map_err(be("get"))?;
                let mut rows = st.query(params![ns, k, now, user]).map_err(be("get"))?;
                match rows.next().map_err(be("get"))? {
                    Some(r) => Some(item(r)?),
                    None => None,
                }
            };
            tx.commit().map_err(be("get"))?;
            Ok(found)
        })
        .await
    }

    async fn with<T: Send + 'static>(
        &self,
        op: &'static str,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let conn = self.conn.clone();
        tokio::task::spawn_blocking(move || {
            let mut c = conn.lock().unwrap_or_else(|p| p.into_inner());
            f(&mut c)
        })
        .await
        .map_err(|e| StoreError::backend(op, e))?
    }
}

fn item(row: &Row<'_>) -> Result<Item, StoreError> {
    let read = be("read");
    let ns: String = row.get(0).map_err(&read)?;
    let key: String = row.get(1).map_err(&read)?;
    let text: String = row.get(2).map_err(&read)?;
    let corrupt = |reason: String| StoreError::Corrupt {
        namespace: ns.clone(),
        key: key.clone(),
        reason,
    };
    let value = match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(m)) => m,
        Ok(other) => return Err(corrupt(format!("value is not an object: {other}"))),
        Err(e) => return Err(corrupt(format!("value is not JSON: {e}"))),
    };
    let time = |i: usize| -> Result<Option<u64>, StoreError> {
        let v: Option<i64> = row.get(i).map_err(&read)?;
        v.map(|t| u64::try_from(t).map_err(|_| corrupt(format!("negative time {t}"))))
            .transpose()
    };
    Ok(Item {
        namespace: undotted(&ns),
        created_at: time(3)?.unwrap_or(0),
        updated_at: time(4)?.unwrap_or(0),
        expires_at: time(5)?,
        owner: row.get(6).map_err(&read)?,
        index: Index::from_column(
            row.get::<_, Option<String>>(7).map_err(&read)?.as_deref(),
            &ns,
            &key,
        )?,
        key,
        value,
    })
}

/// `(sql, params)` of the WHERE clause for live items under `prefix`, owned by `owner`.
pub(super) fn scope(now: u64, prefix: &[String], owner: Option<&String>) -> (String, Vec<Sql>) {
    let mut sql = String::from("(expires_at IS NULL OR expires_at > ?)");
    let mut p = vec![Sql::Integer(now as i64)];
    if !prefix.is_empty() {
        let d = dotted(prefix);
        let below = format!("{d}.");
        sql.push_str(" AND (namespace = ? OR substr(namespace, 1, ?) = ?)");
        p.push(Sql::Text(d));
        p.push(Sql::Integer(below.chars().count() as i64));
        p.push(Sql::Text(below));
    }
    if let Some(o) = owner {
        sql.push_str(" AND owner = ?");
        p.push(Sql::Text(o.clone()));
    }
    (sql, p)
}

#[async_trait]
impl Store for SqliteStore {
    fn backend_name(&self) -> &'static str {
        "sqlite"
    }

    async fn put(
        &self,
        namespace: &[String],
        key: &str,
        value: Map<String, Value>,
        opts: PutOptions,
    ) -> Result<Item, StoreError> {
        check_item(namespace, key)?;
        let now = (self.clock)();
        let ttl_ms = opts.ttl.map(|t| t.as_millis() as u64);
        let mut it = Item {
            namespace: namespace.to_vec(),
            key: key.to_string(),
            value,
            created_at: now,
            updated_at: now,
            expires_at: ttl_ms.map(|t| now + t),
            owner: opts.owner,
            index: opts.index,
        };
        let index = it.index.to_column();
        let text = Value::Object(it.value.clone()).to_string();
        let (ns, k, owner, expires) = (
            dotted(namespace),
            it.key.clone(),
            it.owner.clone(),
            it.expires_at,
        );
        // One statement checks the owner and writes: a user's write (?7 set) updates only an
        // expired row or their own, an unrestricted one (?7 NULL) any row, keeping its owner.
        // An expired item is gone: its replacement is created now, with the new owner.
        let written: Option<(i64, Option<String>)> = self
            .with("put", move |c| {
                c.prepare_cached(
                    "INSERT INTO planwright_store AS s (namespace, key, value, created_at, updated_at, expires_at, ttl_ms, owner, index_paths)
                     VALUES (?1, ?2, ?3, ?4, ?4, ?5, ?6, ?7, ?8)
                     ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value,
                       index_paths = excluded.index_paths,
                       created_at = CASE WHEN s.expires_at IS NULL OR s.expires_at > ?4
                                    THEN s.created_at ELSE excluded.created_at END,
                       updated_at = excluded.updated_at, expires_at = excluded.expires_at,
                       ttl_ms = excluded.ttl_ms,
                       owner = CASE WHEN ?7 IS NULL AND (s.expires_at IS NULL OR s.expires_at > ?4)
                               THEN s.owner ELSE ?7 END
                     WHERE ?7 IS NULL OR s.owner IS ?7
                       OR (s.expires_at IS NOT NULL AND s.expires_at <= ?4)
                     RETURNING created_at, owner",
                )
                .and_then(|mut st| {
                    st.query_row(
                        params![ns, k, text, now as i64, expires.map(|t| t as i64), ttl_ms.map(|t| t as i64), owner, index],
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )
                    .optional()
                })
                .map_err(be("put"))
            })
            .await?;
        let Some((created, owner)) = written else {
            return Err(StoreError::not_owner(namespace, key));
        };
        it.created_at = created as u64;
        it.owner = owner;
        Ok(it)
    }

    async fn get(&self, namespace: &[String], key: &str) -> Result<Option<Item>, StoreError> {
        self.read(namespace, key, None).await
    }

    async fn get_as(
        &self,
        namespace: &[String],
        key: &str,
        user: &str,
    ) -> Result<Option<Item>, StoreError> {
        self.read(namespace, key, Some(user.to_string())).await
    }

    async fn delete(&self, namespace: &[String], key: &str) -> Result<bool, StoreError> {
        check_item(namespace, key)?;
        let now = (self.clock)() as i64;
        let (ns, k) = (dotted(namespace), key.to_string());
        self.with("delete", move |c| {
            // IMMEDIATE: a deferred transaction that reads first and then writes fails at once
            // (SQLITE_BUSY_SNAPSHOT, which no busy timeout retries) when another connection to the
            // file — the checkpointer's, a second replica's — wrote in between.
            let tx = c
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .map_err(be("delete"))?;
            let live: bool = tx
                .query_row(
                    "SELECT EXISTS (SELECT 1 FROM planwright_store WHERE namespace = ?1 AND key = ?2
                     AND (expires_at IS NULL OR expires_at > ?3))",
                    params![ns, k, now],
                    |r| r.get(0),
                )
                .map_err(be("delete"))?;
            tx.execute(
                "DELETE FROM planwright_store WHERE namespace = ?1 AND key = ?2",
                params![ns, k],
            )
            .map_err(be("delete"))?;
            tx.commit().map_err(be("delete"))?;
            Ok(live)
        })
        .await
    }

    async fn delete_as(
        &self,
        namespace: &[String],
        key: &str,
        user: &str,
    ) -> Result<bool, StoreError> {
        check_item(namespace, key)?;
        let now = (self.clock)() as i64;
        let (ns, k, user) = (dotted(namespace), key.to_string(), user.to_string());
        let refused = self
            .with("delete", move |c| {
                // IMMEDIATE: the write lock is held from the read on, so no other process
                // writes the row between the check and the delete.
                let tx = c
                    .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                    .map_err(be("delete"))?;
                let found: Option<(Option<String>, bool)> = tx
                    .query_row(
                        "SELECT owner, (expires_at IS NULL OR expires_at > ?3) FROM planwright_store
                         WHERE namespace = ?1 AND key = ?2",
                        params![ns, k, now],
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )
                    .optional()
                    .map_err(be("delete"))?;
                let answer = match found {
                    None => Ok(false),
                    Some((owner, true)) if owner.as_deref() != Some(user.as_str()) => Err(()),
                    Some((_, live)) => {
                        tx.execute(
                            "DELETE FROM planwright_store WHERE namespace = ?1 AND key = ?2",
                            params![ns, k],
                        )
                        .map_err(be("delete"))?;
                        Ok(live)
                    }
                };
                tx.commit().map_err(be("delete"))?;
                Ok(answer)
            })
            .await?;
        refused.map_err(|()| StoreError::not_owner(namespace, key))
    }

    async fn search(&self, query: &SearchQuery) -> Result<Vec<Item>, StoreError> {
        check_prefix(&query.namespace_prefix)?;
        let now = (self.clock)();
        let (mut sql, mut p) = scope(now, &query.namespace_prefix, query.owner.as_ref());
        for (field, v) in &query.filter {
            sql.push_str(" AND (value -> ?) = json(?)");
            p.push(Sql::Text(format!("$.\"{}\"", field.replace('"', "\\\""))));
            p.push(Sql::Text(v.to_string()));
        }
        let sql = format!(
            "SELECT {COLUMNS} FROM planwright_store WHERE {sql} ORDER BY namespace, key LIMIT ? OFFSET ?"
        );
        p.push(Sql::Integer(i64::try_from(query.limit).unwrap_or(i64::MAX)));
        p.push(Sql::Integer(
            i64::try_from(query.offset).unwrap_or(i64::MAX),
        ));
        self.with("search", move |c| {
            let mut st = c.prepare_cached(&sql).map_err(be("search"))?;
            let mut rows = st
                .query(rusqlite::params_from_iter(p))
                .map_err(be("search"))?;
            let mut out = Vec::new();
            while let Some(r) = rows.next().map_err(be("search"))? {
                out.push(item(r)?);
            }
            Ok(out)
        })
        .await
    }

    async fn list_namespaces(&self, query: &NamespaceQuery) -> Result<Vec<Namespace>, StoreError> {
        check_prefix(&query.prefix)?;
        let now = (self.clock)();
        let (sql, p) = scope(now, &query.prefix, query.owner.as_ref());
        let sql = format!("SELECT DISTINCT namespace FROM planwright_store WHERE {sql}");
        let all = self
            .with("list namespaces", move |c| {
                let mut st = c.prepare_cached(&sql).map_err(be("list namespaces"))?;
                let rows = st
                    .query_map(rusqlite::params_from_iter(p), |r| r.get::<_, String>(0))
                    .map_err(be("list namespaces"))?;
                rows.map(|r| r.map(|t| undotted(&t)).map_err(be("list namespaces")))
                    .collect::<Result<Vec<_>, _>>()
            })
            .await?;
        Ok(query.answer(all))
    }

    async fn sweep(&self) -> Result<u64, StoreError> {
        let now = (self.clock)() as i64;
        self.with("sweep", move |c| {
            c.execute(
                "DELETE FROM planwright_store WHERE expires_at IS NOT NULL AND expires_at <= ?1",
                params![now],
            )
            .map(|n| n as u64)
            .map_err(be("sweep"))
        })
        .await
    }
}
