//! What the coordinator needs from the engine: the store, the extension host, the providers, the settings and the
//! template fetcher, shared by every run.

use std::sync::Arc;

use cairn_host::ExtensionHost;
use cairn_store::Store;

use crate::fetch::TemplateFetcher;
use crate::provider::Providers;
use crate::settings::EngineSettings;

/// What the coordinator needs from the engine.
pub(crate) struct EngineEnv {
    pub store: Arc<dyn Store>,
    pub host: Arc<ExtensionHost>,
    pub providers: Arc<Providers>,
    pub settings: EngineSettings,
    /// Downloads `templateLink.uri` templates and `parametersLink` files.
    pub fetcher: Arc<dyn TemplateFetcher>,
}
