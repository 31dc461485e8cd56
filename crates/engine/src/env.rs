//! What the coordinator needs from the engine: the store, the extension host, the providers, the settings and the
//! template fetcher, shared by every run.

use std::sync::Arc;

use cairn_host::{ExtensionHost, Registry};
use cairn_store::Store;
use cairn_template::resource_types::ExtensionTypes;
use cairn_template::resource_types::types::TypeSet;

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

impl EngineEnv {
    /// Asks the extensions a template declares (`extensions`, or v1 `imports`) for their types, once per
    /// extension, so that the preflight, which runs on the coordinator without I/O, finds them in the registry.
    /// Extensions registered with types, or that publish none, cost nothing here.
    pub(crate) async fn fetch_extension_types(&self, template: &serde_json::Value) {
        let declared = ["extensions", "imports"]
            .into_iter()
            .filter_map(|section| template.get(section)?.as_object())
            .flat_map(|section| section.values())
            .filter_map(|declaration| {
                let name = declaration
                    .get("name")
                    .or_else(|| declaration.get("provider"))?
                    .as_str()?;
                Some((name, declaration.get("version")?.as_str()?))
            });
        for (name, version) in declared {
            self.host.registry().fetch_types(name, version).await;
        }
    }
}

/// The resource types the extension registry knows, as the template checks ask for them.
pub(crate) struct RegistryTypes<'r>(pub &'r Registry);

impl ExtensionTypes for RegistryTypes<'_> {
    fn types(&self, name: &str, version: &str) -> Option<Arc<TypeSet>> {
        self.0.types(name, version)
    }
}
