// The Moses tokenizer of sacremoses (MosesTokenizer.tokenize, without escaping), rule for rule in its order, for a
// model trained on lowercased, Moses-tokenized text (`--preprocess lowercase_tokenized`): the page must hand it a
// sentence prepared exactly as the pipeline does. No JavaScript library found does this (transformers.js's XLM
// tokenizer says it is inexact for want of it); `vt-site` writes what the rules read from sacremoses itself into
// explorer.json ("moses"): the language, its nonbreaking prefixes and sacremoses' character classes as code point
// ranges (Perl's, which JavaScript's \p{...} classes do not match).

// Python's whitespace (str.isspace), which its \s, strip() and split() use; JavaScript's \s differs.
const SPACE = "\\t\\n\\v\\f\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";

const characters = (ranges) =>
  ranges.map(([first, last]) => `\\u{${first.toString(16)}}-\\u{${last.toString(16)}}`).join("");

export function mosesTokenizer({ lang, nonbreaking_prefixes, numeric_only_prefixes, alnum, alpha, numbers, lower }) {
  const [ALNUM, ALPHA, N] = [alnum, alpha, numbers].map(characters);
  const all = (source) => new RegExp(source, "gu");
  const spaces = all(`[${SPACE}]+`);
  const ends = all(`^[${SPACE}]+|[${SPACE}]+$`);
  const strip = (text) => text.replace(ends, "");
  // The apostrophe rules of English, of French and Italian, and of every other language.
  const apostrophes = {
    en: [
      [`([^${ALPHA}])'([^${ALPHA}])`, "$1 ' $2"],
      [`([^${ALPHA}${N}])'([${ALPHA}])`, "$1 ' $2"],
      [`([${ALPHA}])'([^${ALPHA}])`, "$1 ' $2"],
      [`([${ALPHA}])'([${ALPHA}])`, "$1 '$2"],
      [`([${N}])'(s)`, "$1 '$2"],
    ],
    fr: [
      [`([^${ALPHA}])'([^${ALPHA}])`, "$1 ' $2"],
      [`([^${ALPHA}])'([${ALPHA}])`, "$1 ' $2"],
      [`([${ALPHA}])'([^${ALPHA}])`, "$1 ' $2"],
      [`([${ALPHA}])'([${ALPHA}])`, "$1' $2"],
    ],
  }[lang === "it" ? "fr" : lang]?.map(([pattern, replacement]) => [all(pattern), replacement]) ?? [[/'/g, " ' "]];

  // handles_nonbreaking_prefixes: a word's final full stop is split off unless the word is an abbreviation.
  const nonbreaking = new Set(nonbreaking_prefixes);
  const numericOnly = new Set(numeric_only_prefixes);
  const anyAlpha = new RegExp(`[${ALPHA}]`, "u");
  const lowerLetter = new RegExp(`^[${characters(lower)}]$`, "u");
  const splitFullStops = (text) => {
    const tokens = strip(text).split(spaces);
    return tokens.map((token, i) => {
      const prefix = /^([^]+)\.$/u.exec(token)?.[1];
      const next = tokens[i + 1];
      const kept =
        prefix === undefined ||
        (prefix.includes(".") && anyAlpha.test(prefix)) ||
        (nonbreaking.has(prefix) && !numericOnly.has(prefix)) ||
        (next !== undefined && lowerLetter.test(String.fromCodePoint(next.codePointAt(0)))) ||
        (numericOnly.has(prefix) && next !== undefined && /^[0-9]/.test(next));
      return kept ? token : `${prefix} .`;
    }).join(" ");
  };

  // Built once: the character classes make each expression some thousands of characters long.
  const padOthers = all(`([^${ALNUM}${SPACE}.'\`,\\-])`);
  // COMMA_SEPARATE_1 to 3: a comma inside 5,300 stays.
  const commas = [[all(`([^${N}]),`), "$1 , "], [all(`,([^${N}])`), " , $1"], [all(`([${N}]),$`), "$1 , "]];

  return (input) => {
    let text = strip(input.replace(spaces, " ").replace(/[\x00-\x1f]/g, "")); // DEDUPLICATE_SPACE, ASCII_JUNK
    text = text.replace(padOthers, " $1 "); // PAD_NOT_ISALNUM
    const dots = (run, at) => ` ${"DOT".repeat(run.length)}MULTI${at + run.length < text.length ? " " : ""}`;
    text = text.replace(/\.{2,}/g, dots); // replace_multidots: "..." stays one token
    for (const [pattern, replacement] of [...commas, ...apostrophes]) text = text.replace(pattern, replacement);
    text = strip(splitFullStops(text).replace(spaces, " "));
    text = text.replace(/\.' ?$/, " . ' "); // TRAILING_DOT_APOSTROPHE
    return text.replace(/(?:DOT)+MULTI/g, (marker) => ".".repeat((marker.length - 5) / 3)); // restore_multidots
  };
}
