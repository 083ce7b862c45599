//! The PostgreSQL store: one table, `planwright_store`, reached through a `deadpool-postgres`
//! pool, so many processes share one memory. Values are `jsonb` (filters compare with `->` and
//! jsonb equality); the namespace column uses the "C" collation so order and prefixes are
//! byte-wise, as in the other backends.

use super::{
    check_item, check_prefix, dotted, system_clock, undotted, Index, Item, Namespace,
    NamespaceQuery, PutOptions, SearchQuery, Store, StoreClock, StoreError,
};
use async_trait::async_trait;
use deadpool_postgres::Pool;
use serde_json::{Map, Value};
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

/// Serialises the table's creation between processes starting at once.
const SCHEMA_LOCK: i64 = 0x706c_7773_746f_7265; // "plwstore"

const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS planwright_store (
    namespace TEXT COLLATE "C" NOT NULL,
    key TEXT COLLATE "C" NOT NULL,
    value JSONB NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    expires_at BIGINT,
    ttl_ms BIGINT,
    owner TEXT,
    PRIMARY KEY (namespace, key)
);
CREATE INDEX IF NOT EXISTS planwright_store_expires ON planwright_store (expires_at)
    WHERE expires_at IS NOT NULL;
ALTER TABLE planwright_store ADD COLUMN IF NOT EXISTS index_paths TEXT;
"#;

const COLUMNS: &str =
    "namespace, key, value::text, created_at, updated_at, expires_at, owner, index_paths";

/// A store in a PostgreSQL database.
pub struct PostgresStore {
    pool: Pool,
    clock: StoreClock,
}

fn be<E: std::error::Error + Send + Sync + 'static>(op: &'static str) -> impl Fn(E) -> StoreError {
    move |e| StoreError::backend(op, e)
}

/// Why a pool did not open, as the store says it: a malformed URL is its [`StoreError::BadUrl`].
pub(super) fn open_error(e: crate::checkpoint::CheckpointError) -> StoreError {
    match e {
        crate::checkpoint::CheckpointError::BadUrl { url, reason } => {
            StoreError::BadUrl { url, reason }
        }
        e => StoreError::backend("connect", e),
    }
}

impl PostgresStore {
    /// Connects to `url` (the same pool options and TLS modes as the PostgreSQL checkpointer:
    /// docs/checkpoints.md) and creates the table if needed.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::connect_with_clock(url, system_clock()).await
    }

    /// [`PostgresStore::connect`] on `clock`.
    pub async fn connect_with_clock(url: &str, clock: StoreClock) -> Result<Self, StoreError> {
        // The checkpointer's pool settings: URL options (`pool_size`, timeouts, `sslmode`
        // with TLS) mean the same here, so the store reaches any database the threads do. A
        // pool of its own, checked against the server's free connections.
        let shared = crate::checkpoint::postgres::SharedPool::open(url)
            .await
            .map_err(open_error)?;
        Self::with_pool(shared.pool(), clock).await
    }

    /// A store on an existing pool (the process's shared one, see
    /// [`PgPools`](crate::checkpoint::PgPools)); creates the table if needed.
    pub async fn with_pool(pool: Pool, clock: StoreClock) -> Result<Self, StoreError> {
        let mut client = pool.get().await.map_err(be("connect"))?;
        let tx = client.transaction().await.map_err(be("create table"))?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])
            .await
            .map_err(be("create table"))?;
        tx.batch_execute(SCHEMA).await.map_err(be("create table"))?;
        tx.commit().await.map_err(be("create table"))?;
        drop(client);
        Ok(Self { pool, clock })
    }

    /// The live item (if `user` is given: only theirs), its TTL refreshed.
    async fn read(
        &self,
        namespace: &[String],
        key: &str,
        user: Option<&str>,
    ) -> Result<Option<Item>, StoreError> {
        check_item(namespace, key)?;
        let now = (self.clock)() as i64;
        let ns = dotted(namespace);
        let client = self.client("get").await?;
        // Only an item with a TTL is written to (its expiry refreshed); others are just read.
        let rows = client
            .query(
                &format!(
                    "WITH touched AS (
                       UPDATE planwright_store SET expires_at = $3 + ttl_ms
                       WHERE namespace = $1 AND key = $2 AND ttl_ms IS NOT NULL AND expires_at > $3
                         AND ($4::text IS NULL OR owner = $4::text)
                       RETURNING {COLUMNS})
                     SELECT * FROM touched
                     UNION ALL
                     SELECT {COLUMNS} FROM planwright_store
                     WHERE namespace = $1 AND key = $2 AND ttl_ms IS NULL
                       AND (expires_at IS NULL OR expires_at > $3)
                       AND ($4::text IS NULL OR owner = $4::text)"
                ),
                &[&ns, &key, &now, &user],
            )
            .await
            .map_err(be("get"))?;
        rows.first().map(item).transpose()
    }

    async fn client(&self, op: &'static str) -> Result<deadpool_postgres::Object, StoreError> {
        self.pool.get().await.map_err(be(op))
    }
}

fn item(row: &Row) -> Result<Item, StoreError> {
    let read = be::<tokio_postgres::Error>("read");
    let ns: String = row.try_get(0).map_err(&read)?;
    let key: String = row.try_get(1).map_err(&read)?;
    let text: String = row.try_get(2).map_err(&read)?;
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
        let v: Option<i64> = row.try_get(i).map_err(&read)?;
        v.map(|t| u64::try_from(t).map_err(|_| corrupt(format!("negative time {t}"))))
            .transpose()
    };
    Ok(Item {
        namespace: undotted(&ns),
        created_at: time(3)?.unwrap_or(0),
        updated_at: time(4)?.unwrap_or(0),
        expires_at: time(5)?,
        owner: row.try_get(6).map_err(&read)?,
        index: Index::from_column(row.try_get::<_, Option<&str>>(7).map_err(&read)?, &ns, &key)?,
        key,
        value,
    })
}

/// Parameters of a dynamic query, numbered as they are pushed.
#[derive(Default)]
struct Params(Vec<Box<dyn ToSql + Sync + Send>>);

impl Params {
    fn push(&mut self, v: impl ToSql + Sync + Send + 'static) -> String {
        self.0.push(Box::new(v));
        format!("${}", self.0.len())
    }

    fn refs(&self) -> Vec<&(dyn ToSql + Sync)> {
        self.0
            .iter()
            .map(|b| b.as_ref() as &(dyn ToSql + Sync))
            .collect()
    }
}

fn scope(p: &mut Params, now: u64, prefix: &[String], owner: Option<&String>) -> String {
    let mut sql = format!(
        "(expires_at IS NULL OR expires_at > {})",
        p.push(now as i64)
    );
    if !prefix.is_empty() {
        let d = dotted(prefix);
        let below = format!("{d}.");
        let len = below.chars().count() as i32;
        sql.push_str(&format!(
            " AND (namespace = {} OR substr(namespace, 1, {}) = {})",
            p.push(d),
            p.push(len),
            p.push(below)
        ));
    }
    if let Some(o) = owner {
        sql.push_str(&format!(" AND owner = {}", p.push(o.clone())));
    }
    sql
}

#[async_trait]
impl Store for PostgresStore {
    fn backend_name(&self) -> &'static str {
        "postgres"
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
        let ttl_ms = opts.ttl.map(|t| t.as_millis() as i64);
        let expires = ttl_ms.map(|t| now as i64 + t);
        let text = Value::Object(value.clone()).to_string();
        let ns = dotted(namespace);
        let index = opts.index.to_column();
        let client = self.client("put").await?;
        // One statement checks the owner and writes (the row is locked while its WHERE is
        // evaluated): a user's write ($7 set) updates only an expired row or their own, an
        // unrestricted one ($7 NULL) any row, keeping its owner. An expired item is gone: its
        // replacement is created now, with the new owner.
        let row = client
            .query_opt(
                "INSERT INTO planwright_store AS s (namespace, key, value, created_at, updated_at, expires_at, ttl_ms, owner, index_paths)
                 VALUES ($1, $2, $3::text::jsonb, $4, $4, $5, $6, $7::text, $8)
                 ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value,
                   index_paths = excluded.index_paths,
                   created_at = CASE WHEN s.expires_at IS NULL OR s.expires_at > $4
                                THEN s.created_at ELSE excluded.created_at END,
                   updated_at = excluded.updated_at, expires_at = excluded.expires_at,
                   ttl_ms = excluded.ttl_ms,
                   owner = CASE WHEN $7::text IS NULL AND (s.expires_at IS NULL OR s.expires_at > $4)
                           THEN s.owner ELSE $7::text END
                 WHERE $7::text IS NULL OR s.owner IS NOT DISTINCT FROM $7::text
                   OR (s.expires_at IS NOT NULL AND s.expires_at <= $4)
                 RETURNING created_at, owner",
                &[&ns, &key, &text, &(now as i64), &expires, &ttl_ms, &opts.owner, &index],
            )
            .await
            .map_err(be("put"))?;
        let Some(row) = row else {
            return Err(StoreError::not_owner(namespace, key));
        };
        let created: i64 = row.try_get(0).map_err(be("put"))?;
        Ok(Item {
            namespace: namespace.to_vec(),
            key: key.to_string(),
            value,
            created_at: created as u64,
            updated_at: now,
            expires_at: expires.map(|t| t as u64),
            owner: row.try_get(1).map_err(be("put"))?,
            index: opts.index,
        })
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
        self.read(namespace, key, Some(user)).await
    }

    async fn delete(&self, namespace: &[String], key: &str) -> Result<bool, StoreError> {
        check_item(namespace, key)?;
        let now = (self.clock)() as i64;
        let ns = dotted(namespace);
        let client = self.client("delete").await?;
        let row = client
            .query_opt(
                "DELETE FROM planwright_store WHERE namespace = $1 AND key = $2
                 RETURNING (expires_at IS NULL OR expires_at > $3)",
                &[&ns, &key, &now],
            )
            .await
            .map_err(be("delete"))?;
        match row {
            Some(r) => r.try_get(0).map_err(be("delete")),
            None => Ok(false),
        }
    }

    async fn delete_as(
        &self,
        namespace: &[String],
        key: &str,
        user: &str,
    ) -> Result<bool, StoreError> {
        check_item(namespace, key)?;
        let now = (self.clock)() as i64;
        let ns = dotted(namespace);
        let client = self.client("delete").await?;
        // One statement: the delete takes only an expired row or the user's own; the outer
        // SELECT sees the table as it was before it, so it tells a live item of someone else
        // (refused, nothing deleted) from no item at all.
        let row = client
            .query_one(
                "WITH gone AS (
                   DELETE FROM planwright_store WHERE namespace = $1 AND key = $2
                     AND (owner = $3 OR (expires_at IS NOT NULL AND expires_at <= $4))
                   RETURNING (expires_at IS NULL OR expires_at > $4) AS live)
                 SELECT COALESCE((SELECT live FROM gone), false),
                   EXISTS (SELECT 1 FROM planwright_store WHERE namespace = $1 AND key = $2
                     AND (expires_at IS NULL OR expires_at > $4)
                     AND owner IS DISTINCT FROM $3)",
                &[&ns, &key, &user, &now],
            )
            .await
            .map_err(be("delete"))?;
        let (deleted, refused): (bool, bool) = (
            row.try_get(0).map_err(be("delete"))?,
            row.try_get(1).map_err(be("delete"))?,
        );
        if refused {
            return Err(StoreError::not_owner(namespace, key));
        }
        Ok(deleted)
    }

    async fn search(&self, query: &SearchQuery) -> Result<Vec<Item>, StoreError> {
        check_prefix(&query.namespace_prefix)?;
        let now = (self.clock)();
        let mut p = Params::default();
        let mut sql = scope(&mut p, now, &query.namespace_prefix, query.owner.as_ref());
        for (field, v) in &query.filter {
            sql.push_str(&format!(
                " AND value -> {} = {}::text::jsonb",
                p.push(field.clone()),
                p.push(v.to_string())
            ));
        }
        let limit = p.push(i64::try_from(query.limit).unwrap_or(i64::MAX));
        let offset = p.push(i64::try_from(query.offset).unwrap_or(i64::MAX));
        let sql = format!(
            "SELECT {COLUMNS} FROM planwright_store WHERE {sql}
             ORDER BY namespace, key LIMIT {limit} OFFSET {offset}"
        );
        let client = self.client("search").await?;
        let rows = client.query(&sql, &p.refs()).await.map_err(be("search"))?;
        rows.iter().map(item).collect()
    }

    async fn list_namespaces(&self, query: &NamespaceQuery) -> Result<Vec<Namespace>, StoreError> {
        check_prefix(&query.prefix)?;
        let now = (self.clock)();
        let mut p = Params::default();
        let sql = scope(&mut p, now, &query.prefix, query.owner.as_ref());
        let sql = format!("SELECT DISTINCT namespace FROM planwright_store WHERE {sql}");
        let client = self.client("list namespaces").await?;
        let rows = client
            .query(&sql, &p.refs())
            .await
            .map_err(be("list namespaces"))?;
        let all = rows
            .iter()
            .map(|r| r.try_get::<_, String>(0).map(|t| undotted(&t)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(be("list namespaces"))?;
        Ok(query.answer(all))
    }

    async fn sweep(&self) -> Result<u64, StoreError> {
        let now = (self.clock)() as i64;
        let client = self.client("sweep").await?;
        client
            .execute(
                "DELETE FROM planwright_store WHERE expires_at IS NOT NULL AND expires_at <= $1",
                &[&now],
            )
            .await
            .map_err(be("sweep"))
    }
}
