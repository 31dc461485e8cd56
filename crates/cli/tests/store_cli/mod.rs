//! What the `cairn store` command tests share: running `cairn` with a clean store environment, and a database of
//! its own on a throwaway PostgreSQL cluster.
#![allow(
    dead_code,
    reason = "each test binary compiles this module; not all of them use all of it"
)]

use std::process::{Command, Output};

use cairn_testpg::TestPostgres;
use sqlx::PgPool;

/// `cairn` with no store, key, server or home from the environment, plus `env`.
pub fn cairn(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cairn"))
        .env_remove("CAIRN_STORE")
        .env_remove("CAIRN_STORE_KEY")
        .env_remove("CAIRN_STORE_KEY_FILE")
        .env_remove("CAIRN_HOME")
        .env("NO_COLOR", "1")
        .envs(env.iter().copied())
        .args(args)
        .output()
        .expect("cairn runs")
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Creates the database `name` (a plain identifier) on `cluster` and returns its URL.
pub async fn database(cluster: &TestPostgres, name: &str) -> String {
    let admin = PgPool::connect(&cluster.url()).await.expect("connect");
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&admin)
        .await
        .expect("create database");
    admin.close().await;
    cluster.url_for_database(name)
}
