"""`fcl lsp`, the language server, driven as an editor drives it: the real process, JSON-RPC
messages framed with Content-Length headers on its stdin and stdout."""
from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from fcl.prelude import PRELUDE_PATH
from fcl.types.builtins import BUILTINS

# The console script that `pip install -e .` put next to this Python.
FCL = Path(sys.executable).with_name("fcl")
WAIT = 60  # seconds: generous, for 2 busy CI cores


class Client:
    """A minimal LSP client: one thread reads the server's framed messages into a queue."""

    def __init__(self) -> None:
        self.process = subprocess.Popen([str(FCL), "lsp"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE)
        self.incoming: queue.Queue[dict[str, Any]] = queue.Queue()
        self.notifications: list[dict[str, Any]] = []
        self.next_id = 0
        self.capabilities: dict[str, Any] = {}
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        stream = self.process.stdout
        assert stream is not None
        while True:
            headers = {}
            while (line := stream.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode("ascii").partition(":")
                headers[name.strip().lower()] = value.strip()
            if not headers:
                return  # the server closed its stdout
            body = stream.read(int(headers["content-length"]))
            self.incoming.put(json.loads(body.decode("utf-8")))

    def initialize(self) -> None:
        result = self.request("initialize", {"processId": None, "rootUri": None,
                                             "capabilities": {}})
        self.capabilities = result["capabilities"]
        self.notify("initialized", {})

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode("utf-8")
        assert self.process.stdin is not None
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.process.stdin.flush()

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        self.send({"method": method, **({"params": params} if params is not None else {})})

    def request(self, method: str, params: dict[str, Any] | None = None) -> Any:
        self.next_id += 1
        self.send({"id": self.next_id, "method": method,
                   **({"params": params} if params is not None else {})})
        while True:
            message = self.receive()
            if message.get("id") == self.next_id and "method" not in message:
                assert "error" not in message, message["error"]
                return message.get("result")
            self.notifications.append(message)

    def receive(self) -> dict[str, Any]:
        try:
            return self.incoming.get(timeout=WAIT)
        except queue.Empty:
            raise AssertionError("the server sent nothing") from None

    def diagnostics(self, uri: str) -> list[dict[str, Any]]:
        """The next diagnostics published for `uri`."""
        for message in self.notifications:
            if message.get("method") == "textDocument/publishDiagnostics" \
                    and message["params"]["uri"] == uri:
                self.notifications.remove(message)
                return message["params"]["diagnostics"]
        while True:
            message = self.receive()
            if message.get("method") == "textDocument/publishDiagnostics" \
                    and message["params"]["uri"] == uri:
                return message["params"]["diagnostics"]
            self.notifications.append(message)

    def open(self, uri: str, text: str) -> list[dict[str, Any]]:
        self.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "fcl", "version": 1, "text": text}})
        return self.diagnostics(uri)

    def at(self, uri: str, line: int, character: int) -> dict[str, Any]:
        return {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}}

    def stop(self) -> int:
        assert self.request("shutdown") is None
        self.notify("exit")
        return self.process.wait(timeout=WAIT)


@pytest.fixture(scope="module")
def client():
    client = Client()
    client.initialize()
    yield client
    if client.process.poll() is None:
        client.stop()


def rng(line: int, start: int, end: int, end_line: int | None = None) -> dict[str, Any]:
    return {"start": {"line": line, "character": start},
            "end": {"line": line if end_line is None else end_line, "character": end}}


def prelude_line(start: str) -> int:
    """The 0-based line of the prelude that starts with `start`."""
    lines = PRELUDE_PATH.read_text().splitlines()
    return next(i for i, line in enumerate(lines) if line.startswith(start))


PROGRAM = """\
-- Doubles a number.
fun twice x = x * 2
val bad = twice true
val four = let two = 2 in twice two
val evens = map (fn i => twice i) (iota 4)
"""


def test_the_server_names_itself_and_its_features(client):
    capabilities = client.capabilities
    assert capabilities["hoverProvider"] and capabilities["definitionProvider"]
    assert "completionProvider" in capabilities
    assert capabilities["textDocumentSync"]["change"] == 2  # incremental edits


def test_a_type_error_is_a_diagnostic_at_its_span_and_fixing_it_clears_it(client):
    uri = "file:///tmp/lsp/fix.fcl"
    [error] = client.open(uri, PROGRAM)
    assert error["range"] == rng(2, 16, 20)  # `true` on line 3
    assert error["message"] == ("`twice` expects its 1st argument to have type `int`, "
                                "but this has type `bool`")
    assert (error["severity"], error["source"]) == (1, "fcl")
    # As an editor sends a keystroke: only the changed range, here `true` -> `3`.
    client.notify("textDocument/didChange", {
        "textDocument": {"uri": uri, "version": 2},
        "contentChanges": [{"range": rng(2, 16, 20), "text": "3"}]})
    assert client.diagnostics(uri) == []


def test_each_failing_declaration_is_reported_but_not_what_follows_from_it(client):
    errors = client.open("file:///tmp/lsp/several.fcl", """\
val a = 1 + true
val b = a + false
val c = 2 + false
val d = c * 2
""")
    # `b` fails for using `a` and `d` for using `c`: only `a` and `c` are wrong.
    assert [error["range"] for error in errors] == [rng(0, 12, 16), rng(2, 12, 17)]


def test_a_parse_error_is_located_with_its_note(client):
    uri = "file:///tmp/lsp/parse.fcl"
    [error] = client.open(uri, "val s = (1 +\n")
    assert error["range"] == rng(0, 11, 12)  # the `+` that the input ends with
    assert error["message"] == "unexpected end of input; expected an expression"
    [note] = error["relatedInformation"]
    assert note["message"] == "this `(` is never closed"
    assert note["location"] == {"uri": uri, "range": rng(0, 8, 9)}


def test_ranges_count_utf16_code_units_as_lsp_does(client):
    # The emoji is one Python character but two UTF-16 code units, the protocol's default.
    [error] = client.open("file:///tmp/lsp/emoji.fcl", 'val s = "\U0001F600" + 1\n')
    assert error["range"] == rng(0, 8, 12)


def test_hover_on_a_builtin_shows_its_scheme_and_description(client):
    uri = "file:///tmp/lsp/hover.fcl"
    client.open(uri, PROGRAM)
    hover = client.request("textDocument/hover", client.at(uri, 4, 13))  # on `map`
    assert hover["contents"]["kind"] == "markdown"
    text = hover["contents"]["value"]
    assert "map : forall 'a 'b. ('b -> 'a) -> ['b] -> ['a]" in text
    assert BUILTINS["map"][2] in text


def test_hover_on_a_user_function_shows_its_type_comment_and_place(client):
    uri = "file:///tmp/lsp/hover-user.fcl"
    client.open(uri, PROGRAM)
    for line, character in [(1, 5), (4, 27)]:  # its definition, and a use
        text = client.request("textDocument/hover", client.at(uri, line, character))[
            "contents"]["value"]
        assert text == ("```fcl\ntwice : int -> int\n```\n\nDoubles a number.\n\n"
                        "Defined in this file, line 2.")


def test_hover_on_locals_and_prelude_names(client):
    uri = "file:///tmp/lsp/hover-local.fcl"
    client.open(uri, PROGRAM)
    for character in (20, 31):  # the parameter `i`, and its use
        text = client.request("textDocument/hover", client.at(uri, 4, character))[
            "contents"]["value"]
        assert text == "```fcl\ni : int\n```\n\nA local name, bound on line 5."
    iota = client.request("textDocument/hover", client.at(uri, 4, 36))["contents"]["value"]
    assert iota.startswith("```fcl\niota : int -> [int]\n```")
    assert f"Defined in the prelude, line {prelude_line('fun iota ') + 1}." in iota
    assert client.request("textDocument/hover", client.at(uri, 0, 5)) is None  # a comment


def test_hover_still_answers_for_definitions_before_an_error(client):
    uri = "file:///tmp/lsp/partial.fcl"
    client.open(uri, PROGRAM)  # line 3 fails to type-check
    text = client.request("textDocument/hover", client.at(uri, 1, 6))["contents"]["value"]
    assert "twice : int -> int" in text


def test_completion_offers_names_and_keywords_with_the_prefix(client):
    uri = "file:///tmp/lsp/complete.fcl"
    client.open(uri, PROGRAM + "val z = tw")
    items = client.request("textDocument/completion", client.at(uri, 5, 10))["items"]
    assert [item["label"] for item in items] == ["twice"]
    assert items[0]["detail"] == "int -> int"
    labels = {item["label"] for item in client.request(
        "textDocument/completion", client.at(uri, 4, 14))["items"]}  # after `ma` of `map`
    assert {"map", "mapPull", "mapPush"} <= labels
    assert all(label.startswith("ma") for label in labels)
    keywords = {item["label"]: item for item in client.request(
        "textDocument/completion", client.at(uri, 2, 1))["items"]}  # after `v` of `val`
    assert keywords["val"]["kind"] == 14  # Keyword


def test_while_the_text_does_not_parse_completion_knows_its_last_parsed_names(client):
    uri = "file:///tmp/lsp/typing.fcl"
    assert client.open(uri, "fun twice x = x * 2\n") == []
    broken = "fun twice x = x * 2\nval z = (tw"
    client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2},
                                             "contentChanges": [{"text": broken}]})
    [error] = client.diagnostics(uri)
    assert error["message"].startswith("unexpected end of input")
    items = client.request("textDocument/completion", client.at(uri, 1, 11))["items"]
    assert [item["label"] for item in items] == ["twice"]
    client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    assert client.diagnostics(uri) == []  # closed: its diagnostics are withdrawn


def test_go_to_definition_of_a_user_name_a_local_and_a_prelude_name(client):
    uri = "file:///tmp/lsp/definition.fcl"
    client.open(uri, PROGRAM)
    twice = client.request("textDocument/definition", client.at(uri, 3, 27))
    assert twice == {"uri": uri, "range": rng(1, 4, 9)}
    two = client.request("textDocument/definition", client.at(uri, 3, 33))
    assert two == {"uri": uri, "range": rng(3, 15, 18)}
    iota = client.request("textDocument/definition", client.at(uri, 4, 36))
    assert iota == {"uri": PRELUDE_PATH.as_uri(), "range": rng(prelude_line("fun iota "), 4, 8)}
    # A builtin has no source to go to.
    assert client.request("textDocument/definition", client.at(uri, 4, 13)) is None


@pytest.mark.slow  # a server of its own: 1.3-5 s
def test_shutdown_and_exit_end_the_server_cleanly():
    client = Client()
    client.initialize()
    assert client.stop() == 0


# ---- outline, references, rename, signature help, semantic tokens ------------------------------

NAMED = """\
-- Doubles a number.
sig twice : int -> int
fun twice x = x * 2
val four = let two = 2 in twice two
val evens = map (fn i => twice i) (iota 4)
"""


def request_error(client, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """The error a request is answered with."""
    client.next_id += 1
    client.send({"id": client.next_id, "method": method, "params": params})
    while True:
        message = client.receive()
        if message.get("id") == client.next_id and "method" not in message:
            assert "error" in message, message
            return message["error"]
        client.notifications.append(message)


def apply(text: str, edits: list[dict[str, Any]]) -> str:
    lines = text.split("\n")
    for edit in sorted(edits, key=lambda e: (e["range"]["start"]["line"],
                                             e["range"]["start"]["character"]), reverse=True):
        start, end = edit["range"]["start"], edit["range"]["end"]
        assert start["line"] == end["line"]
        line = lines[start["line"]]
        lines[start["line"]] = line[:start["character"]] + edit["newText"] + \
            line[end["character"]:]
    return "\n".join(lines)


def test_the_outline_lists_the_files_definitions_with_their_types(client):
    uri = "file:///tmp/lsp/outline.fcl"
    assert client.open(uri, NAMED) == []
    symbols = client.request("textDocument/documentSymbol", {"textDocument": {"uri": uri}})
    assert [(s["name"], s["kind"], s["detail"]) for s in symbols] == [
        ("twice", 12, "int -> int"), ("four", 13, "int"), ("evens", 13, "[int]")]
    assert symbols[0]["selectionRange"] == rng(2, 4, 9)
    assert symbols[0]["range"]["start"]["line"] in (1, 2)


def test_references_find_the_definition_its_signature_and_every_use(client):
    uri = "file:///tmp/lsp/references.fcl"
    client.open(uri, NAMED)
    found = client.request("textDocument/references", {
        **client.at(uri, 3, 27), "context": {"includeDeclaration": True}})  # on a use
    assert [f["range"] for f in found] == [rng(1, 4, 9), rng(2, 4, 9), rng(3, 26, 31),
                                           rng(4, 25, 30)]
    assert all(f["uri"] == uri for f in found)
    uses = client.request("textDocument/references", {
        **client.at(uri, 2, 5), "context": {"includeDeclaration": False}})
    assert [f["range"] for f in uses] == [rng(3, 26, 31), rng(4, 25, 30)]
    # A local: the `let` and its one use, not the other names.
    local = client.request("textDocument/references", {
        **client.at(uri, 3, 15), "context": {"includeDeclaration": True}})
    assert [f["range"] for f in local] == [rng(3, 15, 18), rng(3, 32, 35)]


def test_rename_changes_every_occurrence_and_the_file_still_checks(client):
    uri = "file:///tmp/lsp/rename.fcl"
    client.open(uri, NAMED)
    edit = client.request("textDocument/rename", {**client.at(uri, 4, 27), "newName": "double"
                                                  "_it"})
    renamed = apply(NAMED, edit["changes"][uri])
    assert renamed == NAMED.replace("twice", "double_it")
    assert client.open("file:///tmp/lsp/renamed.fcl", renamed) == []
    edit = client.request("textDocument/rename", {**client.at(uri, 3, 15), "newName": "pair"})
    assert apply(NAMED, edit["changes"][uri]).splitlines()[3] == \
        "val four = let pair = 2 in twice pair"


@pytest.mark.parametrize("line, character, new_name, why", [
    (2, 5, "map", "`map` is already defined"),          # would shadow the prelude's map
    (2, 5, "four", "`four` is already defined"),        # would clash with the file's own
    (2, 5, "let", "`let` is not a name FCL accepts"),
    (2, 5, "two words", "`two words` is not a name FCL accepts"),
    (4, 13, "mapping", "this name is a builtin, not defined in this file"),
    (4, 36, "range", "this name is the prelude's, not defined in this file"),  # iota
])
def test_rename_refuses_what_would_change_the_program(client, line, character, new_name, why):
    uri = "file:///tmp/lsp/refuse.fcl"
    client.open(uri, NAMED)
    error = request_error(client, "textDocument/rename",
                          {**client.at(uri, line, character), "newName": new_name})
    assert error["code"] == -32803 and why in error["message"]


def test_signature_help_shows_the_function_and_the_argument_being_written(client):
    uri = "file:///tmp/lsp/signature.fcl"
    text = "fun twice x = x * 2\nval y = generate 4 \n"
    client.open(uri, text)
    help = client.request("textDocument/signatureHelp", client.at(uri, 1, 19))
    [signature] = help["signatures"]
    assert signature["label"] == "generate : forall 'a. int -> (int -> 'a) -> ['a]"
    assert [p["label"] for p in signature["parameters"]] == ["int", "int -> 'a"]
    assert help["activeParameter"] == 1
    # A user function, in brackets, while the text does not check yet.
    client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2},
                                             "contentChanges": [{"text": "fun twice x = x * 2\n"
                                                                 "val z = map (twice "}]})
    client.diagnostics(uri)
    help = client.request("textDocument/signatureHelp", client.at(uri, 1, 19))
    assert help["signatures"][0]["label"] == "twice : int -> int"
    assert help["activeParameter"] == 0


def test_semantic_tokens_colour_keywords_names_numbers_and_comments(client):
    legend = client.capabilities["semanticTokensProvider"]["legend"]
    uri = "file:///tmp/lsp/tokens.fcl"
    client.open(uri, NAMED)
    data = client.request("textDocument/semanticTokens/full",
                          {"textDocument": {"uri": uri}})["data"]
    tokens, line, char = {}, 0, 0
    for k in range(0, len(data), 5):
        d_line, d_char, length, kind, modifiers = data[k:k + 5]
        line, char = line + d_line, (char + d_char if d_line == 0 else d_char)
        text = NAMED.splitlines()[line][char:char + length]
        tokens.setdefault((line, text), (legend["tokenTypes"][kind],  # its first on the line
                                         {m for bit, m in enumerate(legend["tokenModifiers"])
                                          if modifiers >> bit & 1}))
    assert tokens[(0, "-- Doubles a number.")] == ("comment", set())
    assert tokens[(1, "sig")] == ("keyword", set())
    assert tokens[(1, "int")] == ("type", set())
    assert tokens[(2, "twice")] == ("function", {"declaration"})
    assert tokens[(2, "x")] == ("parameter", {"declaration"})
    assert tokens[(2, "2")] == ("number", set())
    assert tokens[(2, "*")] == ("operator", set())
    assert tokens[(3, "two")] == ("variable", {"declaration"})
    assert tokens[(4, "map")] == ("function", {"defaultLibrary"})
    assert tokens[(4, "twice")] == ("function", set())


def test_float_types_and_literals_are_tokens_of_their_kind():
    from fcl.errors import Source
    from fcl.lsp_names import semantic_tokens
    from fcl.session import Session
    source = Source("t.fcl", "sig x : float\nval x = addf 1.5f 2f")
    decls, _ = Session.new().add_cell(source)
    kinds = {source.text[t.span.start:t.span.end]: t.kind for t in semantic_tokens(source, decls)}
    assert (kinds["float"], kinds["addf"], kinds["1.5f"], kinds["2f"]) == \
        ("type", "function", "number", "number")
