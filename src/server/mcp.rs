//! `cordon mcp` (work in progress).
use std::sync::Arc;

use super::ExecService;

/// Serves MCP over stdio until the client goes away.
pub async fn serve(_service: Arc<ExecService>) -> anyhow::Result<()> {
    Err(anyhow::anyhow!("cordon mcp is not built yet"))
}
