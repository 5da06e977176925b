//! The web page is built into the binary: the server answers `/` and every
//! file of `www/` (the wasm package included) with its content type, whatever
//! its working directory holds; `www = DIR` serves a directory instead.

use std::path::{Path, PathBuf};

use bubble_tests::{HttpClient, HttpResponse, Server, TEST_CONFIG};

fn www() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../www")
}

async fn get(client: &HttpClient, path: &str) -> HttpResponse {
    client.request("GET", path, &[], Vec::new()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_built_in_page_and_its_wasm_package() {
    // The server runs in an empty temporary directory: nothing to read from.
    let server = Server::start(TEST_CONFIG);
    let client = server.http_anonymous();
    for (path, file, content_type) in [
        ("/", "index.html", "text/html; charset=utf-8"),
        ("/index.html", "index.html", "text/html; charset=utf-8"),
        ("/app.mjs", "app.mjs", "text/javascript"),
        ("/style.css", "style.css", "text/css; charset=utf-8"),
        ("/sim.mjs", "sim.mjs", "text/javascript"),
        (
            "/pkg/bubble_wasm.js",
            "pkg/bubble_wasm.js",
            "text/javascript",
        ),
        (
            "/pkg/bubble_wasm_bg.wasm",
            "pkg/bubble_wasm_bg.wasm",
            "application/wasm",
        ),
    ] {
        let res = get(&client, path).await;
        assert_eq!(res.status, 200, "{path}");
        assert_eq!(
            res.header("content-type").as_deref(),
            Some(content_type),
            "{path}"
        );
        let expected = std::fs::read(www().join(file)).unwrap();
        assert!(res.body == expected, "{path} is not www/{file}");
    }
    assert_eq!(get(&client, "/missing.mjs").await.status, 404);

    // A browser's copy is revalidated with the ETag.
    let first = get(&client, "/pkg/bubble_wasm_bg.wasm").await;
    let etag = first.header("etag").expect("an ETag");
    let again = client
        .request(
            "GET",
            "/pkg/bubble_wasm_bg.wasm",
            &[("if-none-match", &etag)],
            Vec::new(),
        )
        .await;
    assert_eq!(again.status, 304);
    assert!(again.body.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn www_serves_a_directory_instead() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("index.html"), "<p>my page</p>").unwrap();
    let config = format!("www = '{}'\n{TEST_CONFIG}", dir.path().display());
    let server = Server::start(&config);
    let client = server.http_anonymous();
    let res = get(&client, "/").await;
    assert_eq!((res.status, res.text().as_str()), (200, "<p>my page</p>"));
    assert_eq!(get(&client, "/pkg/bubble_wasm.js").await.status, 404);
}
