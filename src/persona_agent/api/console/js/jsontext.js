// Where each value of a JSON text is, so that one field can be changed in the text and
// every other byte (order, spacing, escapes) stays as written.

const WHITESPACE = /[ \t\n\r]/;

// The spans of the text's values by path ("data.description": [start, end)), or null
// for text that is not JSON. Only the spans of object members are recorded.
export function valueSpans(text) {
  const spans = new Map();
  let at = 0;
  const skip = () => {
    while (at < text.length && WHITESPACE.test(text[at])) at += 1;
  };
  const fail = () => {
    throw new SyntaxError(`JSON: unexpected ${text[at] || "end"} at ${at}`);
  };
  const string = () => {
    if (text[at] !== '"') fail();
    const start = at;
    at += 1;
    while (at < text.length && text[at] !== '"') at += text[at] === "\\" ? 2 : 1;
    if (at >= text.length) fail();
    at += 1;
    return JSON.parse(text.slice(start, at));
  };
  const value = (path) => {
    skip();
    const start = at;
    if (text[at] === "{") {
      at += 1;
      skip();
      if (text[at] === "}") at += 1;
      else {
        for (;;) {
          skip();
          const key = string();
          skip();
          if (text[at] !== ":") fail();
          at += 1;
          const inner = path === null ? null : path ? `${path}.${key}` : key;
          skip();
          const valueStart = at;
          value(inner);
          if (inner !== null) spans.set(inner, [valueStart, at]);
          skip();
          if (text[at] === ",") at += 1;
          else if (text[at] === "}") {
            at += 1;
            break;
          } else fail();
        }
      }
    } else if (text[at] === "[") {
      at += 1;
      skip();
      if (text[at] === "]") at += 1;
      else {
        for (;;) {
          value(null); // members of list items are not addressed
          skip();
          if (text[at] === ",") at += 1;
          else if (text[at] === "]") {
            at += 1;
            break;
          } else fail();
        }
      }
    } else if (text[at] === '"') string();
    else {
      const match = /^(?:true|false|null|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)/.exec(text.slice(at, at + 400));
      if (!match) fail();
      at += match[0].length;
    }
    return start;
  };
  try {
    value("");
    skip();
    if (at !== text.length) fail();
  } catch {
    return null;
  }
  return spans;
}

// The text with the value at ``path`` (an existing member) replaced by ``newValue``; the
// rest of the text as it was. Null when the path is not in the text.
export function withValue(text, path, newValue) {
  const spans = valueSpans(text);
  const span = spans && spans.get(path);
  if (!span) return null;
  return text.slice(0, span[0]) + JSON.stringify(newValue) + text.slice(span[1]);
}
