//! The routes of the Agent Server API, mounted over one [`AppState`]: the only file that names
//! every endpoint, so the API's surface reads in one place.

use super::{assistants_api, crons};
use super::{
    auth, errors, follow, health, history, listen, mcp, metrics, runs, stateless, store, stream,
    studio, thread_copy, thread_search, thread_state, thread_stream, threads, AppState,
};
use axum::routing::{get, post, put};
use axum::Router;
use std::sync::Arc;

/// The router over `state` with the per-client request cap of `limits` (what `serve` runs;
/// connections must come through [`listen::serve`] for the client address to be known).
pub fn router_with_limits(state: Arc<AppState>, limits: &listen::Limits) -> Router {
    let table = Arc::new(listen::InFlight::default());
    let cap = limits.max_requests_per_client;
    router(state).layer(axum::middleware::from_fn(move |req, next| {
        listen::per_client(table.clone(), cap, req, next)
    }))
}

/// The router over `state`.
pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/ok", get(health::ok))
        .route("/metrics", get(metrics::render))
        .route("/threads", post(threads::create_thread))
        .route("/threads/search", post(thread_search::search_threads))
        .route("/threads/count", post(thread_search::count_threads))
        .route("/threads/prune", post(threads::prune_threads))
        .route(
            "/threads/{thread_id}",
            get(threads::get_thread)
                .delete(threads::delete_thread)
                .patch(threads::patch_thread),
        )
        .route(
            "/threads/{thread_id}/state",
            get(thread_state::thread_state)
                .post(thread_state::update_state)
                .patch(thread_state::patch_state),
        )
        .route(
            "/threads/{thread_id}/state/checkpoint",
            post(thread_state::state_at_checkpoint),
        )
        .route("/threads/{thread_id}/runs/wait", post(runs::run_wait))
        .route("/threads/{thread_id}/runs/stream", post(stream::run_stream))
        .route(
            "/threads/{thread_id}/runs",
            post(runs::create).get(runs::list),
        )
        .route(
            "/threads/{thread_id}/runs/{run_id}",
            get(runs::get).delete(runs::delete),
        )
        .route("/runs", post(stateless::create))
        .route("/runs/wait", post(stateless::wait))
        .route("/runs/stream", post(stateless::stream))
        .route("/runs/batch", post(stateless::batch))
        .route("/runs/cancel", post(runs::cancel_many))
        .route("/threads/{thread_id}/runs/{run_id}/join", get(runs::join))
        .route(
            "/threads/{thread_id}/runs/{run_id}/stream",
            get(follow::join_stream),
        )
        .route(
            "/threads/{thread_id}/runs/{run_id}/cancel",
            post(runs::cancel),
        )
        .route("/threads/{thread_id}/history", post(history::history))
        .route("/threads/{thread_id}/stream", get(thread_stream::join))
        .merge(assistants_api::routes())
        .merge(crons::routes())
        .merge(super::protocol::routes())
        .route(
            "/threads/{thread_id}/state/{checkpoint_id}",
            get(thread_state::state_at),
        )
        .route("/threads/{thread_id}/copy", post(thread_copy::copy))
        .route(
            "/store/items",
            put(store::put_item)
                .get(store::get_item)
                .delete(store::delete_item),
        )
        .route("/store/items/search", post(store::search_items))
        .route("/store/namespaces", post(store::list_namespaces))
        .route(
            "/mcp",
            post(mcp::post).get(mcp::no_stream).delete(mcp::no_stream),
        )
        .fallback(errors::no_route)
        .method_not_allowed_fallback(errors::no_method)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::authenticate,
        ))
        // The studio's page and scripts hold no data: they load without a token and ask for one.
        .merge(studio::routes())
        .layer(axum::extract::DefaultBodyLimit::max(2 * 1024 * 1024))
        .layer(axum::middleware::from_fn(errors::request_span))
        .with_state(state)
}
