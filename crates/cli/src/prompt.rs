//! Yes/no questions before a command changes something, asked as az (knack) asks them: only when stdin is a
//! terminal, `question (y/n): ` on stderr, asked again until the answer is y, yes, n or no (any case); the end
//! of input is a no.

use std::io::IsTerminal as _;

use crate::output::Failure;

/// What the user said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Answer {
    Yes,
    No,
    /// stdin is not a terminal: nobody to ask (scripts decide with `--yes`).
    NoTerminal,
}

/// Asks `question` on a terminal.
pub(crate) fn ask(question: &str) -> Result<Answer, Failure> {
    if !std::io::stdin().is_terminal() {
        return Ok(Answer::NoTerminal);
    }
    ask_on(
        question,
        &mut std::io::stdin().lock(),
        &mut std::io::stderr(),
    )
}

/// Asks `question` on `output`, reading answers from `input`.
fn ask_on(
    question: &str,
    input: &mut dyn std::io::BufRead,
    output: &mut dyn std::io::Write,
) -> Result<Answer, Failure> {
    loop {
        write!(output, "{question} (y/n): ")
            .and_then(|()| output.flush())
            .map_err(|e| Failure::Other(e.into()))?;
        let mut line = String::new();
        let read = input
            .read_line(&mut line)
            .map_err(|e| Failure::Other(e.into()))?;
        if read == 0 {
            return Ok(Answer::No);
        }
        match line.trim().to_ascii_lowercase().as_str() {
            "y" | "yes" => return Ok(Answer::Yes),
            "n" | "no" => return Ok(Answer::No),
            _ => writeln!(output, "Please enter 'y' or 'n'.")
                .map_err(|e| Failure::Other(e.into()))?,
        }
    }
}

/// Asks on a terminal; without one, as the older `delete` commands always did, the answer is yes (those commands
/// take `--yes` to skip the question on a terminal too).
pub(crate) fn confirm_unless_scripted(question: &str) -> Result<bool, Failure> {
    Ok(ask(question)? != Answer::No)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answers(input: &str) -> (Answer, String) {
        let mut output = Vec::new();
        let answer = ask_on("Go?", &mut input.as_bytes(), &mut output).unwrap();
        (answer, String::from_utf8(output).unwrap())
    }

    #[test]
    fn yes_and_no_in_any_case() {
        assert_eq!(answers("y\n").0, Answer::Yes);
        assert_eq!(answers("YES\n").0, Answer::Yes);
        assert_eq!(answers("n\n").0, Answer::No);
        assert_eq!(answers("No\n").0, Answer::No);
    }

    #[test]
    fn anything_else_is_asked_again_and_the_end_of_input_is_no() {
        let (answer, shown) = answers("maybe\ny\n");
        assert_eq!(answer, Answer::Yes);
        assert_eq!(shown, "Go? (y/n): Please enter 'y' or 'n'.\nGo? (y/n): ");
        assert_eq!(answers("").0, Answer::No);
    }
}
