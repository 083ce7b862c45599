//! A PostgreSQL database of one test's own on this machine's server: created fresh, dropped
//! (with whatever is still connected to it) when the test ends. Tests that start servers over
//! PostgreSQL use it so that each sees only its own tables and connections. Include it beside
//! `backends.rs` (`#[path = "…/tests/support/pg_database.rs"] mod pg_database;`).

#![allow(dead_code)]

use super::backends;
use std::net::SocketAddr;
use std::str::FromStr;

/// One test's database.
pub struct FreshDatabase {
    /// Its name (lowercase letters and digits).
    pub name: String,
}

impl FreshDatabase {
    /// A new database whose name starts with `prefix` (lowercase letters), or `None` where
    /// PostgreSQL does not answer outside CI (in CI that is a failure: see `backends`).
    pub async fn create(prefix: &str) -> Option<Self> {
        backends::postgres().await?;
        let name = format!("{prefix}{}", backends::unique().replace('-', ""));
        admin()
            .await
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .expect("the test server creates a database");
        Some(Self { name })
    }

    /// Its URL on the test server, keeping the test URL's options.
    pub fn url(&self) -> String {
        let base = backends::pg_url();
        let (server, query) = base.split_once('?').unwrap_or((&base, ""));
        let server = server.rsplit_once('/').map_or(server, |(s, _)| s);
        if query.is_empty() {
            format!("{server}/{}", self.name)
        } else {
            format!("{server}/{}?{query}", self.name)
        }
    }

    /// Its URL through `addr` (a proxy in front of the test server, say), as the test server's
    /// user, with `options` (`pool_size=4&application_name=…`).
    pub fn url_at(&self, addr: SocketAddr, options: &str) -> String {
        let (_, user) = server();
        format!("postgres://{user}@{addr}/{}?{options}", self.name)
    }
}

/// The test server's address and user.
pub fn server() -> (SocketAddr, String) {
    let cfg = tokio_postgres::Config::from_str(&backends::pg_url()).expect("a PostgreSQL URL");
    let host = match &cfg.get_hosts()[0] {
        tokio_postgres::config::Host::Tcp(h) if h != "localhost" => h.clone(),
        _ => "127.0.0.1".into(),
    };
    let port = cfg.get_ports().first().copied().unwrap_or(5432);
    (
        format!("{host}:{port}").parse().expect("a host and port"),
        cfg.get_user().unwrap_or("postgres").to_string(),
    )
}

impl Drop for FreshDatabase {
    fn drop(&mut self) {
        let sql = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
        // On a runtime of its own: the test's may be shutting down.
        let _ = std::thread::spawn(move || {
            if let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                rt.block_on(async move {
                    let _ = admin().await.batch_execute(&sql).await;
                });
            }
        })
        .join();
    }
}

/// A client on the test server's own database (`backends::pg_url`).
pub async fn admin() -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(&backends::pg_url(), tokio_postgres::NoTls)
        .await
        .expect("the test server answers");
    tokio::spawn(conn);
    client
}

/// Connections open under `application_name` `app`, and how many of them are `LISTEN`ing.
pub async fn open_under(admin: &tokio_postgres::Client, app: &str) -> (i64, i64) {
    let row = admin
        .query_one(
            "SELECT count(*), count(*) FILTER (WHERE query LIKE 'LISTEN%')
             FROM pg_stat_activity WHERE application_name = $1",
            &[&app],
        )
        .await
        .expect("pg_stat_activity answers");
    (row.get(0), row.get(1))
}
