//! The names shell completion offers for `--context` and `-n`/`--namespace`: the contexts of
//! the kubeconfig (read from its files, no network), and the cluster's namespaces (one list
//! call, one page, bounded by [`LIST_TIMEOUT`]). Any failure gives no names: a completion
//! that prints an error or keeps the prompt waiting is worse than none.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use super::args::ApiServerArgs;
use crate::apiserver::client::Limits;
use crate::apiserver::error::Verb;
use crate::apiserver::kubeconfig::{Environment, context_names};

/// The most a namespace completion may keep the shell waiting, exec credential plugin
/// included (`aws eks get-token` and the like take about a second).
pub(crate) const LIST_TIMEOUT: Duration = Duration::from_secs(2);
/// Namespaces asked for: one page. A cluster with more gets the first ones (the API server
/// lists them by name), which is what a prompt can show anyway.
const PAGE: u32 = 500;
/// The largest answer read (500 namespaces are ~1 MiB with managedFields).
const MAX_BODY: usize = 4 * 1024 * 1024;

/// `--context`'s candidates: the contexts of `--kubeconfig FILE`, else of `$KUBECONFIG` or
/// `~/.kube/config`, sorted.
pub(crate) fn contexts(kubeconfig: Option<PathBuf>) -> Vec<String> {
    context_names(&Environment::from_process(kubeconfig))
}

/// `-n`'s candidates: the namespaces of the cluster the kubeconfig and `context` name, as
/// the API server lists them; empty on any failure or after [`LIST_TIMEOUT`].
pub(crate) fn namespaces(kubeconfig: Option<PathBuf>, context: Option<String>) -> Vec<String> {
    let args = ApiServerArgs {
        apiserver: None,
        apiserver_token_file: None,
        apiserver_ca_file: None,
        kubeconfig,
        context,
    };
    let Ok(Some(loaded)) = args.target() else {
        return Vec::new();
    };
    let Ok(client) = crate::apiserver::ApiClient::new(&loaded.api) else {
        return Vec::new();
    };
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return Vec::new();
    };
    let mut url = client.url(&["api", "v1", "namespaces"]);
    url.query_pairs_mut()
        .append_pair("limit", &PAGE.to_string());
    let listed = rt.block_on(async {
        // The limits bound each request; the outer timeout also bounds the exec plugin.
        let limits = Limits::new(LIST_TIMEOUT, MAX_BODY);
        tokio::time::timeout(
            LIST_TIMEOUT,
            client.expect(Verb::List, &url, None, limits, &[200]),
        )
        .await
    });
    match listed {
        Ok(Ok(list)) => names(&list),
        _ => Vec::new(),
    }
}

/// The `metadata.name` of each item of a list.
fn names(list: &Value) -> Vec<String> {
    list.get("items")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|i| i.pointer("/metadata/name").and_then(Value::as_str))
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::names;
    use serde_json::json;

    #[test]
    fn names_are_the_items_metadata_names_in_list_order() {
        let list = json!({"kind": "NamespaceList", "items": [
            {"metadata": {"name": "kube-system"}},
            {"metadata": {}},
            {"metadata": {"name": "team-a"}}]});
        assert_eq!(names(&list), ["kube-system", "team-a"]);
        assert!(names(&json!({"kind": "Status"})).is_empty());
    }
}
