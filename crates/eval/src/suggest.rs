//! "Did you mean" suggestions: the known name closest to a misspelt one, by edit distance ignoring case, for the
//! messages about unknown functions, parameters, variables, resources, properties and outputs.

/// The candidate closest to `name` when it is close enough to be a likely typo: at most a third of `name`'s length
/// in edits (one for names up to five characters), adjacent transpositions counting as one, letter case ignored.
/// A candidate equal to `name` ignoring case is no suggestion (ARM names match ignoring case already); of equally
/// close candidates the first wins.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let wanted = name.to_lowercase();
    let budget = wanted.chars().count().max(3) / 3;
    let mut best: Option<(usize, &'a str)> = None;
    for candidate in candidates {
        let lower = candidate.to_lowercase();
        if lower == wanted {
            return None;
        }
        let distance = strsim::damerau_levenshtein(&wanted, &lower);
        if distance <= budget && best.is_none_or(|(d, _)| distance < d) {
            best = Some((distance, candidate));
        }
    }
    best.map(|(_, candidate)| candidate)
}

/// ` Did you mean 'x'?` for the [`closest`] candidate, or nothing: appended to a sentence that names `name`.
pub fn did_you_mean<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    closest(name, candidates)
        .map(|c| format!(" Did you mean '{c}'?"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_names_are_suggested() {
        let names = ["siteName", "greeting", "vaultName"];
        assert_eq!(closest("siteNme", names), Some("siteName"));
        assert_eq!(closest("SITENAM", names), Some("siteName"));
        assert_eq!(closest("graeting", names), Some("greeting"));
        // A transposition is one edit.
        assert_eq!(closest("vaultNmae", names), Some("vaultName"));
        assert_eq!(closest("toUppr", ["toLower", "toUpper"]), Some("toUpper"));
    }

    #[test]
    fn far_or_equal_names_are_not() {
        let names = ["siteName", "greeting"];
        assert_eq!(closest("location", names), None);
        assert_eq!(closest("x", ["abc"]), None);
        // Same name in another case: ARM matches it already, so no suggestion.
        assert_eq!(closest("SiteName", names), None);
        assert_eq!(closest("a", [] as [&str; 0]), None);
    }

    #[test]
    fn the_closest_of_several_wins() {
        assert_eq!(closest("prefx", ["prefixes", "prefix"]), Some("prefix"));
        assert_eq!(did_you_mean("prefx", ["prefix"]), " Did you mean 'prefix'?");
        assert_eq!(did_you_mean("zzz", ["prefix"]), "");
    }
}
