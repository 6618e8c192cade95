// Chat text as the community's character cards expect it: Markdown (`*actions*` in italics,
// `**bold**`, "dialogue", quotes, lists, code, line breaks as typed), rendered safely.
//
// marked (vendor/marked.esm.js) turns the text into HTML; DOMPurify (vendor/purify.es.mjs)
// sanitizes it into nodes, keeping only the elements Markdown makes. Nothing the model or a
// card writes reaches the page as markup: raw HTML in the text is shown as the text it is
// (marked escapes it), a Markdown picture is shown as its description (no image is loaded
// from what a model wrote), and a link goes only to http(s) or mailto, in a new tab, with
// no referrer. The page's policy (default-src 'self') stays: no inline script or style runs.

import { Marked } from "../vendor/marked.esm.js";
import DOMPurify from "../vendor/purify.es.mjs";

// Said in quotes, as role-play writes speech: shown as dialogue (<q>, its quotes kept).
const QUOTED = /^(?:"[^"\n]+"|“[^”\n]+”)/;

const dialogue = {
  name: "dialogue",
  level: "inline",
  start(source) {
    const found = /["“]/.exec(source);
    return found ? found.index : undefined;
  },
  tokenizer(source) {
    const found = QUOTED.exec(source);
    if (!found) return undefined;
    const quoted = found[0];
    const inner = this.lexer.inlineTokens(quoted.slice(1, -1));
    return { type: "dialogue", raw: quoted, open: quoted[0], close: quoted.slice(-1), tokens: inner };
  },
  renderer(token) {
    return `<q>${token.open}${this.parser.parseInline(token.tokens)}${token.close}</q>`;
  },
};

// Raw HTML (a block or inline) and pictures become plain text, which marked escapes.
function plain(token) {
  if (token.type === "html") {
    const text = { type: "text", raw: token.raw, text: token.raw, escaped: false };
    if (token.block) {
      token.type = "paragraph";
      token.tokens = [text];
    } else {
      Object.assign(token, text);
      delete token.tokens;
    }
  } else if (token.type === "image") {
    Object.assign(token, { type: "text", text: token.text || "", escaped: false });
    delete token.tokens;
  }
}

const markdown = new Marked({ gfm: true, breaks: true, async: false, extensions: [dialogue], walkTokens: plain });

// What Markdown makes, and no more: no picture, form, frame, script or style.
const ALLOWED_TAGS = [
  "p", "br", "em", "strong", "del", "s", "q", "blockquote", "ul", "ol", "li", "code", "pre", "a",
  "h1", "h2", "h3", "h4", "h5", "h6", "hr", "table", "thead", "tbody", "tr", "th", "td",
];
const ALLOWED_ATTR = ["href", "title", "start", "align"];
const LINKABLE = /^(?:https?:|mailto:)/i;

const purify = DOMPurify(window);
purify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName !== "A") return;
  const href = node.getAttribute("href") || "";
  if (!LINKABLE.test(href.trim())) {
    node.removeAttribute("href"); // a relative, javascript: or data: link: its text only
    return;
  }
  node.setAttribute("target", "_blank");
  node.setAttribute("rel", "noopener noreferrer");
});

// The text as sanitized nodes (a DocumentFragment).
export function markup(source) {
  const html = markdown.parse(String(source || ""));
  return purify.sanitize(html, { ALLOWED_TAGS, ALLOWED_ATTR, RETURN_DOM_FRAGMENT: true });
}

// Show the text in `target`, rendered.
export function renderInto(target, source) {
  target.replaceChildren(markup(source));
}
