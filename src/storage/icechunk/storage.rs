//! The crate's storage for a repository URL, from the dataset's options.

use std::collections::BTreeMap;
use std::sync::Arc;

use icechunk::storage::{S3Credentials, S3Options, S3StaticCredentials};
use icechunk::Storage;
use url::Url;

use super::super::{StoreError, StoreOptions};

/// The crate's storage for a repository URL, from the dataset's options
/// (and, as for plain stores, the environment).
pub(super) async fn storage_for(
    url: &Url,
    options: &StoreOptions,
) -> Result<Arc<dyn Storage + Send + Sync>, StoreError> {
    let bad =
        |e: String| StoreError::Unavailable(format!("icechunk repository {}: {e}", super::super::open::redact(url)));
    let prefix = url.path().trim_matches('/').to_string();
    let prefix = (!prefix.is_empty()).then_some(prefix);
    let bucket = || {
        url.host_str()
            .map(str::to_string)
            .ok_or_else(|| bad("no bucket in the URL".into()))
    };
    let opts = &options.backend;
    let option = |names: &[&str], env: &[&str]| {
        names
            .iter()
            .find_map(|n| opts.get(*n).cloned())
            .or_else(|| env.iter().find_map(|v| std::env::var(v).ok()))
    };
    let truthy = |v: Option<String>| v.is_some_and(|v| matches!(v.to_ascii_lowercase().as_str(), "true" | "1" | "yes"));
    let storage = match url.scheme() {
        "file" => {
            let path = url.to_file_path().map_err(|_| bad("not a file path".into()))?;
            icechunk::new_local_filesystem_storage(&path)
                .await
                .map_err(|e| bad(e.to_string()))?
        }
        "s3" | "s3a" => {
            let mut config = S3Options::default();
            config.region = option(&["region", "aws_region"], &["AWS_REGION", "AWS_DEFAULT_REGION"]);
            config.endpoint_url = option(
                &["endpoint", "aws_endpoint", "endpoint_url", "aws_endpoint_url"],
                &["AWS_ENDPOINT", "AWS_ENDPOINT_URL"],
            );
            config.anonymous = truthy(option(
                &["skip_signature", "aws_skip_signature"],
                &["AWS_SKIP_SIGNATURE"],
            ));
            config.allow_http = truthy(option(&["allow_http", "aws_allow_http"], &["AWS_ALLOW_HTTP"]));
            let key = option(&["access_key_id", "aws_access_key_id"], &[]);
            let secret = option(&["secret_access_key", "aws_secret_access_key"], &[]);
            let credentials = match (key, secret) {
                (Some(access_key_id), Some(secret_access_key)) => S3Credentials::Static(S3StaticCredentials {
                    access_key_id,
                    secret_access_key,
                    session_token: option(&["token", "aws_session_token"], &[]),
                    expires_after: None,
                }),
                _ if config.anonymous => S3Credentials::Anonymous,
                _ => S3Credentials::FromEnv,
            };
            icechunk::new_s3_object_store_storage(config, bucket()?, prefix, Some(credentials), vec![], vec![])
                .await
                .map_err(|e| bad(e.to_string()))?
        }
        "gs" => {
            let config: std::collections::HashMap<String, String> = opts.clone().into_iter().collect();
            icechunk::storage::new_gcs_storage(bucket()?, prefix, None, Some(config), vec![], vec![])
                .map_err(|e| bad(e.to_string()))?
        }
        "az" | "azure" => {
            let account = option(
                &["account_name", "azure_storage_account_name"],
                &["AZURE_STORAGE_ACCOUNT_NAME", "AZURE_STORAGE_ACCOUNT"],
            )
            .ok_or_else(|| bad("no account_name option".into()))?;
            let config: std::collections::HashMap<String, String> = opts.clone().into_iter().collect();
            icechunk::storage::new_azure_blob_storage(account, bucket()?, prefix, None, Some(config))
                .await
                .map_err(|e| bad(e.to_string()))?
        }
        "http" | "https" => {
            let config: std::collections::HashMap<String, String> = opts.clone().into_iter().collect();
            icechunk::storage::new_http_storage(url.as_str(), Some(config), None).map_err(|e| bad(e.to_string()))?
        }
        other => return Err(bad(format!("unsupported scheme '{other}'"))),
    };
    Ok(storage)
}

/// Unused options of a dataset would be silently ignored by the crate's
/// builders; name them instead.
pub(crate) fn check_options(scheme: &str, options: &BTreeMap<String, String>) -> Result<(), String> {
    let known: &[&str] = match scheme {
        "s3" | "s3a" => &[
            "region",
            "aws_region",
            "endpoint",
            "aws_endpoint",
            "endpoint_url",
            "aws_endpoint_url",
            "skip_signature",
            "aws_skip_signature",
            "allow_http",
            "aws_allow_http",
            "access_key_id",
            "aws_access_key_id",
            "secret_access_key",
            "aws_secret_access_key",
            "token",
            "aws_session_token",
        ],
        _ => return Ok(()),
    };
    match options.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(format!(
            "invalid store option '{k}' for an Icechunk repository on {scheme}"
        )),
        None => Ok(()),
    }
}
