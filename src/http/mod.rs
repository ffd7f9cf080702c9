//! The HTTP layer: routes, content negotiation, headers, errors. It knows
//! the engine's API (datasets, nodes, read plans) but nothing of codecs.

mod admit;
mod body;
mod caller;
mod conditional;
mod dap2;
mod dap4;
mod data;
mod edr;
mod encoders;
mod explorer;
mod format;
mod middleware;
mod nodes;
mod opendap;
mod ops;
mod ows;
mod passthrough;
mod picture;
mod problem;
mod query;
mod refs;
mod respond;
mod serve;
mod stall;
mod state;
mod tiles;
mod transactions;
mod upload;
mod view;
mod wms;
mod wmts;
mod write;

/// The fuzz properties of the protocols' parsers ([`crate::fuzz_checks`]).
pub(crate) use dap2::check_projection;
pub(crate) use dap4::check_dap4_constraint;
pub(crate) use edr::check_wkt;
pub(crate) use wms::check_frame;

use std::sync::Arc;

use axum::routing::{get, post, put};
use axum::Router;

pub(crate) use admit::{admit, read_slot};
pub(crate) use body::ChannelWriter;
pub use middleware::with_middleware;
use middleware::{compression, no_query_parameters, only_a_transaction};
pub(crate) use middleware::{strip_coding, ProtocolError, Uncompressed};
pub use problem::ApiError;
pub use serve::serve;
use state::check_token;
pub use state::AppState;
pub(crate) use state::{absolute, origin, url_path, url_segment};

/// The application: every route of the v1 contract with its middleware.
pub fn app(state: Arc<AppState>) -> Router {
    with_middleware(routes(), state)
}

/// The routes of the v1 contract. Data, node and listing responses compress
/// on request; passthrough values are served as stored (ranges and lengths
/// stay exact).
pub fn routes() -> Router<Arc<AppState>> {
    let root = get(nodes::root_node)
        .put(write::create_node)
        .patch(write::patch_node)
        .delete(write::delete_node);
    let node_routes = Router::new()
        .route("/v1/datasets/{ds}/nodes", root.clone())
        .route("/v1/datasets/{ds}/nodes/", root)
        .route(
            "/v1/datasets/{ds}/nodes/{*path}",
            get(nodes::node)
                .put(write::create_node)
                .patch(write::patch_node)
                .delete(write::delete_node),
        )
        .route_layer(axum::middleware::from_fn(only_a_transaction));
    let documents = Router::new()
        .route("/v1/datasets", get(nodes::list_datasets))
        .route("/v1/datasets/{ds}/refs", get(refs::refs))
        .route("/v1/datasets/{ds}/refs/{kind}", post(refs::create))
        .route(
            "/v1/datasets/{ds}/refs/{kind}/{name}",
            put(refs::reset_branch).delete(refs::delete),
        )
        .route("/v1/datasets/{ds}/transactions", post(transactions::begin))
        .route(
            "/v1/datasets/{ds}/transactions/{id}",
            get(transactions::show).delete(transactions::abort),
        )
        .route("/v1/datasets/{ds}/transactions/{id}/commit", post(transactions::commit))
        .route_layer(axum::middleware::from_fn(no_query_parameters))
        .merge(node_routes);
    let data = Router::new()
        .route(
            "/v1/datasets/{ds}/data",
            get(data::read_root)
                .head(data::read_root)
                .post(data::read_root)
                .put(write::region_root),
        )
        .route(
            "/v1/datasets/{ds}/data/",
            get(data::read_root)
                .head(data::read_root)
                .post(data::read_root)
                .put(write::region_root),
        )
        .route(
            "/v1/datasets/{ds}/data/{*path}",
            get(data::read).head(data::read).post(data::read).put(write::region),
        )
        .route_layer(axum::middleware::from_fn(read_slot));
    // Takes `ref` and `limit`, checked by the handler.
    let history = Router::new().route("/v1/datasets/{ds}/history", get(refs::history));
    let compressed = documents.merge(data).merge(history).layer(compression());
    let keys = Router::new()
        .route(
            "/v1/datasets/{ds}/zarr/{*key}",
            get(passthrough::get).head(passthrough::get),
        )
        .route("/v1/datasets/{ds}/v2/{*key}", get(view::v2_get).head(view::v2_get))
        .route_layer(axum::middleware::from_fn(read_slot));
    let stores = Router::new()
        .route("/v1/datasets/{ds}/zarr/", get(view::zarr_root).head(view::zarr_root))
        .route("/v1/datasets/{ds}/v2", get(view::v2_root).head(view::v2_root))
        .route("/v1/datasets/{ds}/v2/", get(view::v2_root).head(view::v2_root))
        .merge(keys)
        .route_layer(axum::middleware::from_fn(no_query_parameters));
    let plain = stores
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .route("/metrics", get(ops::metrics))
        .route("/openapi.yaml", get(ops::openapi));
    compressed
        .merge(plain)
        .merge(explorer::routes())
        .merge(tiles::routes())
        .merge(wms::routes())
        .merge(wmts::routes())
        .merge(dap2::routes())
        .merge(dap4::routes())
        .merge(dap_files())
        .merge(edr::routes())
}

/// `/v1/datasets/{ds}/dap.{suffix}` (DAP2) and `/v1/datasets/{ds}/dap4.{suffix}`
/// (DAP4): the root group's answers share one route; each is admitted and
/// answered, errors included, as its protocol does.
fn dap_files() -> Router<Arc<AppState>> {
    use axum::extract::{Request, State};
    use axum::handler::Handler;
    use axum::middleware::Next;
    use axum::response::Response;
    fn is_dap4(request: &Request) -> bool {
        request
            .uri()
            .path()
            .rsplit('/')
            .next()
            .is_some_and(|file| file.starts_with("dap4."))
    }
    async fn answer(State(state): State<Arc<AppState>>, request: Request) -> Response {
        match is_dap4(&request) {
            true => dap4::root_file.call(request, state).await,
            false => dap2::root_file.call(request, state).await,
        }
    }
    async fn admitted(request: Request, next: Next) -> Response {
        match is_dap4(&request) {
            true => admit(request, next, |e| dap4::dap4_error(ApiError::Engine(e))).await,
            false => admit(request, next, |e| dap2::dap_error(ApiError::Engine(e))).await,
        }
    }
    Router::new()
        .route("/v1/datasets/{ds}/{file}", get(answer).head(answer))
        .route_layer(axum::middleware::from_fn(admitted))
        .layer(compression())
}
