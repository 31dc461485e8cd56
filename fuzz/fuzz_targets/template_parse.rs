//! Fuzzes template loading: JSONC parsing, the template model, static checks and offline expansion must never
//! panic, whatever the input.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(root) = cairn_json::parse(text) else { return };
    let _ = cairn_template::checks::check_template(&root);
    let (template, _) = cairn_template::Template::parse(root.clone());
    let (params, _) = cairn_template::ParametersFile::parse(&root);
    let input = cairn_template::DeploymentInput::new(&template, &params, Default::default());
    let _ = cairn_template::expand(input, &cairn_template::Offline);
});
