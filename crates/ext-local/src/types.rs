//! The Local extension's resource types and config type in Bicep's type format: `File` and `Directory`, each
//! identified by its `path`, and the config `{ rootDirectory }`.

use cairn_extension_sdk::types::{Flags, TypeBuilder, TypeEntry, TypeSet};

use crate::{DIRECTORY_TYPE, FILE_TYPE, NAME, VERSION};

/// The types of `File@1.0.0` and `Directory@1.0.0` and of the config.
pub fn types() -> TypeSet {
    let mut b = TypeBuilder::new(NAME, VERSION);
    let string = b.string();
    let path = "Path relative to the root directory; it cannot leave it.";
    // Octal permission bits such as "0644" or "755".
    let mode = b.add(TypeEntry::StringType {
        sensitive: None,
        min_length: Some(1),
        max_length: Some(5),
        pattern: Some("^0?[0-7]{3,4}$".into()),
    });
    let file = b.object(
        FILE_TYPE,
        vec![
            (
                "path",
                string.clone(),
                Flags::REQUIRED | Flags::IDENTIFIER,
                path,
            ),
            (
                "content",
                string.clone(),
                Flags::NONE,
                "UTF-8 text content (empty when omitted).",
            ),
            (
                "mode",
                mode,
                Flags::NONE,
                "Octal permission bits such as \"0644\".",
            ),
        ],
        None,
    );
    b.resource(FILE_TYPE, VERSION, file);
    let directory = b.object(
        DIRECTORY_TYPE,
        vec![(
            "path",
            string.clone(),
            Flags::REQUIRED | Flags::IDENTIFIER,
            path,
        )],
        None,
    );
    b.resource(DIRECTORY_TYPE, VERSION, directory);
    let config = b.object(
        "configuration",
        vec![(
            "rootDirectory",
            string,
            Flags::REQUIRED,
            "The directory every path is relative to.",
        )],
        None,
    );
    b.configuration(config);
    b.finish()
}
