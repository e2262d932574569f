//! The HTTP side: routes, the access guard in front of every one, the page's files, the
//! JSON API and the WebSocket session that carries runs and their results.
//!
//! | route | answer |
//! |-------|--------|
//! | `GET /` | the page (and, when opened with `?token=`, the token as an HttpOnly cookie) |
//! | `GET /page/{file}` | the page's JavaScript modules and style sheet, compiled into the binary |
//! | `GET /api/datasets` | the datasets and plugins under the root ([`Listing`](super::catalog::Listing)), and the live source if one is configured |
//! | `GET /api/info?path=` | a dataset's format, shapes, dtype and details (the live source's: [`LiveSetup::info`]) |
//! | `GET /api/plugin?path=` | a plugin's description: the parameters its form is made from |
//! | `GET /api/ws` | the WebSocket: `run`, `stop` and `export` requests in, results ([`super::wire`]) out |

use super::access::Refusal;
use super::analysis::{Analysis, partitions_for};
use super::catalog::{Catalog, CatalogError};
use super::export::export_message;
use super::lane::{Finished, Lane, Outgoing, Request};
use super::live::{LiveLane, LiveSetup};
use crate::report::{DatasetSummary, Loaded, PluginSummary};
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// What every handler shares.
pub struct Shared {
    pub catalog: Arc<Catalog>,
    pub threads: usize,
    /// The live source, if the server was started with one.
    pub live: Option<Arc<LiveSetup>>,
}

type AppState = State<Arc<Shared>>;

/// The page's files: name, content type, content.
const PAGE: &[(&str, &str, &str)] = &[
    ("app.js", "text/javascript; charset=utf-8", include_str!("page/app.js")),
    ("connection.js", "text/javascript; charset=utf-8", include_str!("page/connection.js")),
    ("views.js", "text/javascript; charset=utf-8", include_str!("page/views.js")),
    ("style.css", "text/css; charset=utf-8", include_str!("page/style.css")),
];

/// The lanes a page may use (each is one thread while its page is open); and
/// [`LIVE_LANE`] when a live source is configured.
pub const LANES: &[&str] = &["pattern", "detector", "frame", "com", "plugin"];

/// The lane of the live source's acquisitions ([`super::live`]).
pub const LIVE_LANE: &str = "live";

pub fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/page/{file}", get(page_file))
        .route("/api/datasets", get(datasets))
        .route("/api/info", get(info))
        .route("/api/plugin", get(plugin))
        .route("/api/ws", get(websocket))
        .layer(middleware::from_fn_with_state(shared.clone(), guard))
        .with_state(shared)
}

/// A refusal as the client sees it: its status and `{"error": message}`.
fn refuse(status: u16, message: String) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::FORBIDDEN);
    (status, Json(json!({"error": message}))).into_response()
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        refuse(self.status(), self.to_string())
    }
}

impl IntoResponse for CatalogError {
    fn into_response(self) -> Response {
        match self {
            CatalogError::Refused(r) => r.into_response(),
            CatalogError::Internal(m) => refuse(500, m),
            other => refuse(422, other.to_string()),
        }
    }
}

/// Check [`super::access::Access`]'s rules before any route; set the token cookie when
/// the page is opened with the token; forbid caching, referrers (the URL has the token)
/// and every fetch but the server's own.
async fn guard(State(shared): AppState, request: axum::extract::Request, next: Next) -> Response {
    let access = shared.catalog.access();
    let headers = request.headers();
    let text = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    let cookies: Vec<&str> = headers.get_all(header::COOKIE).iter().filter_map(|v| v.to_str().ok()).collect();
    let query_token = request
        .uri()
        .query()
        .and_then(|q| q.split('&').find_map(|pair| pair.strip_prefix("token=")))
        .map(str::to_owned);
    if let Err(refusal) = access.check(
        text(header::HOST),
        text(header::ORIGIN),
        query_token.as_deref(),
        text(header::AUTHORIZATION),
        &cookies,
    ) {
        return refusal.into_response();
    }
    let set_cookie = query_token.is_some() && request.uri().path() == "/";
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    if set_cookie
        && let Ok(cookie) = HeaderValue::from_str(&format!(
            "{}={}; HttpOnly; SameSite=Strict; Path=/",
            access.cookie_name(),
            access.token()
        ))
    {
        headers.insert(header::SET_COOKIE, cookie);
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; connect-src 'self' blob:; \
             frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
        ),
    );
    response
}

async fn index() -> Html<&'static str> {
    Html(include_str!("page/index.html"))
}

async fn page_file(axum::extract::Path(file): axum::extract::Path<String>) -> Response {
    match PAGE.iter().find(|(name, _, _)| *name == file) {
        Some((_, content_type, body)) => ([(header::CONTENT_TYPE, *content_type)], *body).into_response(),
        None => refuse(404, format!("the page has no file '{file}'")),
    }
}

/// Run blocking library work off the async threads.
async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Result<T, Response> {
    tokio::task::spawn_blocking(work).await.map_err(|e| refuse(500, format!("internal error: {e}")))
}

async fn datasets(State(shared): AppState) -> Response {
    let live = shared.live.as_ref().map(|l| l.info());
    match blocking(move || shared.catalog.list()).await {
        Ok(listing) => {
            let mut value = serde_json::to_value(listing).unwrap_or_else(|e| json!({"error": e.to_string()}));
            value["live"] = live.unwrap_or(Value::Null);
            Json(value).into_response()
        }
        Err(response) => response,
    }
}

#[derive(Deserialize)]
struct PathQuery {
    path: String,
}

/// What the info panel shows about a dataset: the library's summary (as `udf-host
/// info` prints it) and the partitions the server runs it in.
fn dataset_summary(shared: &Shared, path: &str) -> Result<Value, CatalogError> {
    let opened = shared.catalog.dataset(path)?;
    let summary = DatasetSummary::of(opened.dataset.as_ref(), shared.threads);
    let serve_partitions = partitions_for(summary.bytes as u64, summary.frames, shared.threads);
    let mut value = serde_json::to_value(summary).map_err(|e| CatalogError::Internal(e.to_string()))?;
    value["serve_partitions"] = json!(serve_partitions);
    Ok(value)
}

async fn info(State(shared): AppState, Query(query): Query<PathQuery>) -> Response {
    if let Some(live) = shared.live.as_ref().filter(|l| l.url() == query.path) {
        return Json(live.info()).into_response();
    }
    match blocking(move || dataset_summary(&shared, &query.path)).await {
        Ok(Ok(summary)) => Json(summary).into_response(),
        Ok(Err(e)) => e.into_response(),
        Err(response) => response,
    }
}

/// A plugin's description for its form: the library's summary (as `udf-host inspect
/// --json` prints it) and the path it was asked for.
fn plugin_summary(shared: &Shared, path: &str) -> Result<Value, CatalogError> {
    let udf = shared.catalog.plugin(path)?;
    let summary = PluginSummary::of(udf.description(), Loaded::default());
    let mut value = serde_json::to_value(summary).map_err(|e| CatalogError::Internal(e.to_string()))?;
    value["path"] = json!(path);
    Ok(value)
}

async fn plugin(State(shared): AppState, Query(query): Query<PathQuery>) -> Response {
    match blocking(move || plugin_summary(&shared, &query.path)).await {
        Ok(Ok(summary)) => Json(summary).into_response(),
        Ok(Err(e)) => e.into_response(),
        Err(response) => response,
    }
}

async fn websocket(State(shared): AppState, upgrade: WebSocketUpgrade) -> Response {
    upgrade.on_upgrade(move |socket| session(socket, shared))
}

/// What the page sends over the WebSocket.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum FromPage {
    /// Run `analysis` on `dataset` in `lane`, interrupting the lane's run in flight.
    Run { lane: String, id: u64, dataset: String, analysis: Analysis },
    /// Send the lane's last complete results as files.
    Export { lane: String, id: u64 },
    /// Stop the lane's run in flight (the live lane: the acquisition, or the wait for one).
    Stop { lane: String, id: u64 },
}

fn error_text(lane: &str, id: u64, message: &str) -> Message {
    Message::Text(json!({"type": "error", "lane": lane, "id": id, "message": message}).to_string().into())
}

/// One page's session: its lanes, made as it first uses them, and its results.
async fn session(mut socket: WebSocket, shared: Arc<Shared>) {
    let (out, mut results) = tokio::sync::mpsc::unbounded_channel::<Outgoing>();
    let mut lanes = Lanes::default();
    loop {
        tokio::select! {
            incoming = socket.recv() => {
                let text = match incoming {
                    Some(Ok(Message::Text(text))) => text,
                    Some(Ok(Message::Close(_)) | Err(_)) | None => break,
                    Some(Ok(_)) => continue,
                };
                let reply = match serde_json::from_str::<FromPage>(&text) {
                    Err(e) => Some(error_text("", 0, &format!("cannot read the page's request: {e}"))),
                    Ok(message) => handle(message, &shared, &mut lanes, &out).await,
                };
                if let Some(reply) = reply
                    && socket.send(reply).await.is_err()
                {
                    break;
                }
            }
            outgoing = results.recv() => {
                let message = match outgoing {
                    Some(Outgoing::Binary(bytes)) => Message::Binary(bytes.into()),
                    Some(Outgoing::Text(text)) => Message::Text(text.into()),
                    None => break,
                };
                if socket.send(message).await.is_err() {
                    break;
                }
            }
        }
    }
}

/// A page's lanes, made as it first uses them.
#[derive(Default)]
struct Lanes {
    files: HashMap<String, Lane>,
    live: Option<LiveLane>,
}

impl Lanes {
    /// Run `request` in lane `name` (started now if it is new), interrupting its run in
    /// flight.
    fn submit(
        &mut self,
        name: &str,
        request: Request,
        shared: &Shared,
        out: &tokio::sync::mpsc::UnboundedSender<Outgoing>,
    ) -> std::io::Result<()> {
        let (catalog, threads) = (shared.catalog.clone(), shared.threads);
        if name == LIVE_LANE {
            if let (None, Some(setup)) = (&self.live, &shared.live) {
                self.live = Some(LiveLane::start_live(setup.clone(), catalog, threads, out.clone())?);
            }
            if let Some(lane) = &self.live {
                lane.submit(request);
            }
        } else {
            if !self.files.contains_key(name) {
                self.files.insert(name.to_owned(), Lane::start(name, catalog, threads, out.clone())?);
            }
            if let Some(lane) = self.files.get(name) {
                lane.submit(request);
            }
        }
        Ok(())
    }

    /// Stop lane `name`'s run in flight, if any.
    fn stop(&self, name: &str) {
        if name == LIVE_LANE {
            if let Some(lane) = &self.live {
                lane.stop();
            }
        } else if let Some(lane) = self.files.get(name) {
            lane.stop();
        }
    }

    /// Lane `name`'s last complete run, if any.
    fn finished(&self, name: &str) -> Option<Arc<Finished>> {
        if name == LIVE_LANE {
            self.live.as_ref().and_then(LiveLane::finished)
        } else {
            self.files.get(name).and_then(Lane::finished)
        }
    }
}

/// Act on one request of the page; a message to send back at once, if any.
async fn handle(
    message: FromPage,
    shared: &Arc<Shared>,
    lanes: &mut Lanes,
    out: &tokio::sync::mpsc::UnboundedSender<Outgoing>,
) -> Option<Message> {
    let (lane_name, id) = match &message {
        FromPage::Run { lane, id, .. } | FromPage::Export { lane, id } | FromPage::Stop { lane, id } => {
            (lane.clone(), *id)
        }
    };
    let live = lane_name == LIVE_LANE;
    if live && shared.live.is_none() {
        return Some(error_text(
            &lane_name,
            id,
            "no live source is configured: start udf-host serve with --live merlin://HOST:PORT --nav-shape Y,X",
        ));
    }
    if !live && !LANES.contains(&lane_name.as_str()) {
        return Some(error_text(&lane_name, id, &format!("unknown lane '{lane_name}' (lanes: {})", LANES.join(", "))));
    }
    match message {
        FromPage::Run { dataset, analysis, .. } => {
            let request = Request { id, dataset, analysis, received: Instant::now() };
            let started = lanes.submit(&lane_name, request, shared, out);
            started.err().map(|e| error_text(&lane_name, id, &format!("cannot start a thread: {e}")))
        }
        FromPage::Stop { .. } => {
            lanes.stop(&lane_name);
            None
        }
        FromPage::Export { .. } => {
            let Some(finished) = lanes.finished(&lane_name) else {
                return Some(error_text(&lane_name, id, "nothing to export yet: no run of this panel has completed"));
            };
            let name = lane_name.clone();
            match blocking(move || export_message(&name, id, &finished)).await {
                Ok(Ok(bytes)) => Some(Message::Binary(bytes.into())),
                Ok(Err(e)) => Some(error_text(&lane_name, id, &e.to_string())),
                Err(_) => Some(error_text(&lane_name, id, "internal error while exporting")),
            }
        }
    }
}
