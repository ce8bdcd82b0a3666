"""Embeddings through the runtime: vocabulary, registration, batching, errors, the ``llm_embed`` chain."""

from __future__ import annotations

import base64
import struct
from array import array
from collections.abc import Sequence
from typing import Any

import pytest

from harness_core import Harness, LlmError, ModelInfo, Redactor, TokenUsage, hookimpl
from harness_core.embedding import EmbedCallNext, EmbeddingAdapter, Embeddings, EmbedOptions, float32_from_base64
from harness_core.hookspecs import RegisterAdapter, RegisterEmbedder
from harness_core.plugininfo import Defaults, PluginFailure
from harness_core.secret import MASK
from harness_llm_mock import MockAdapter, MockConfig, MockPlugin

pytestmark = pytest.mark.anyio


def vectors(*rows: Sequence[float]) -> Embeddings:
    return Embeddings.from_rows(rows)


# ------------------------------------------------------------------ vocabulary


def test_rows_are_views_of_one_float32_buffer() -> None:
    result = Embeddings.from_rows([[1.0, 2.0], [3.0, 4.5]], model="m", usage=TokenUsage(3, None))
    assert len(result) == 2
    assert result.dimensions == 2
    assert result.data.typecode == "f"
    assert list(result.data) == [1.0, 2.0, 3.0, 4.5]
    assert result[1].tolist() == [3.0, 4.5]
    assert result[-2].tolist() == [1.0, 2.0]
    assert [row.tolist() for row in result] == result.tolist() == [[1.0, 2.0], [3.0, 4.5]]
    assert result == Embeddings(array("f", [1, 2, 3, 4.5]), 2, model="m", usage=TokenUsage(3, None))
    assert result != vectors([1.0, 2.0], [3.0, 4.5])
    assert result != "vectors"
    assert repr(result).startswith("Embeddings(2 vectors x 2, model='m', usage=TokenUsage(input_tokens=3")
    with pytest.raises(IndexError, match="vector 2 out of range"):
        result[2]
    empty = Embeddings.from_rows([])
    assert len(empty) == 0
    assert empty.tolist() == []


def test_bad_buffers_are_refused() -> None:
    with pytest.raises(ValueError, match="typecode 'd'"):
        Embeddings(array("d", [1.0]), 1)
    with pytest.raises(ValueError, match="3 floats are not a whole number of vectors of 2"):
        Embeddings(array("f", [1, 2, 3]), 2)
    with pytest.raises(ValueError, match="1 floats"):
        Embeddings(array("f", [1]), 0)
    with pytest.raises(LlmError, match="vector 1 has 1 dimensions, vector 0 has 2") as caught:
        Embeddings.from_rows([[1.0, 2.0], [3.0]])
    assert caught.value.code == "PROTOCOL"


def test_join_sums_usage_and_checks_dimensions() -> None:
    one = Embeddings.from_rows([[1.0]], model="m", usage=TokenUsage(2, None))
    two = Embeddings.from_rows([[2.0], [3.0]], model="m", usage=TokenUsage(5, None))
    assert Embeddings.join([one]) is one
    joined = Embeddings.join([one, two])
    assert joined.tolist() == [[1.0], [2.0], [3.0]]
    assert joined.usage == TokenUsage(7, None)
    assert joined.model == "m"
    assert Embeddings.join([one, vectors([4.0])]).usage is None
    assert Embeddings.join([Embeddings.from_rows([]), Embeddings.from_rows([])]).dimensions == 0
    with pytest.raises(LlmError, match=r"different dimensions: \[1, 2\]"):
        Embeddings.join([one, vectors([1.0, 2.0])])


def test_base64_decodes_straight_into_float32() -> None:
    text = base64.b64encode(struct.pack("<3f", 0.5, -1.0, 2.0)).decode()
    assert float32_from_base64(text).tolist() == [0.5, -1.0, 2.0]
    assert float32_from_base64(text.encode()).typecode == "f"
    with pytest.raises(LlmError, match="not valid base64"):
        float32_from_base64("@@@")
    with pytest.raises(LlmError, match="holds 3 bytes"):
        float32_from_base64(base64.b64encode(b"abc"))


# ------------------------------------------------------------------ runtime


class Recording(EmbeddingAdapter):
    """An embedder that records the batches it got and answers ``[len(text)]`` per input."""

    max_batch = 2

    def __init__(self, answer: Any = None) -> None:
        self.batches: list[list[str]] = []
        self.answer = answer
        self.closed = 0

    async def embed(self, options: EmbedOptions) -> Embeddings:
        self.batches.append(options.inputs)
        if isinstance(self.answer, Exception):
            raise self.answer
        if self.answer is not None:
            return self.answer  # type: ignore[no-any-return]
        return Embeddings.from_rows([[float(len(text))] for text in options.inputs], usage=TokenUsage(1, None))

    async def aclose(self) -> None:
        self.closed += 1


class EmbedOnly:
    def __init__(self, adapter: EmbeddingAdapter, routes: Sequence[str] = ("vec",)) -> None:
        self.adapter = adapter
        self.routes = list(routes)

    @hookimpl
    def register_embedder(self, register: RegisterEmbedder) -> None:
        register(self.routes, self.adapter)


async def test_mock_embeds_deterministic_unit_vectors_on_its_chat_route() -> None:
    async with Harness([("mock", MockPlugin(MockConfig()))]) as harness:
        assert harness.embed_routes() == {"mock": "mock"}
        assert harness.default_embed_route() == "mock"
        result = await harness.embed(["hello world", "hi", "hello world"])
        again = await harness.embed(EmbedOptions(inputs=["hi"], route="mock", dimensions=3), dimensions=5)
    assert (result.route, result.source, result.model, result.dimensions) == ("mock", "mock", "hash", 8)
    assert result.usage == TokenUsage(5, None)
    assert result[0].tolist() == result[2].tolist() != result[1].tolist()
    assert abs(sum(x * x for x in result[0].tolist()) - 1) < 1e-5
    assert again.dimensions == 5
    assert len(again) == 1


async def test_route_owner_looks_one_route_up() -> None:
    plugins: list[tuple[str, object]] = [
        ("mock", MockPlugin(MockConfig(routes=["chat"]))),
        ("vec", EmbedOnly(Recording())),
    ]
    async with Harness(plugins) as harness:
        assert harness.route_owner("chat") == "mock"  # its stream adapter's owner
        assert harness.route_owner("vec") is None  # embeds only: no stream adapter
        assert harness.route_owner("vec", embeddings=True) == "vec"  # its embedder's owner
        assert harness.route_owner("nowhere", embeddings=True) is None
        assert (harness.routes(), harness.embed_routes()) == ({"chat": "mock"}, {"chat": "mock", "vec": "vec"})


async def test_the_provider_keyword_of_embed_is_the_deprecated_route() -> None:
    plugins: list[tuple[str, object]] = [("mock", MockPlugin(MockConfig(routes=["a", "b"])))]
    async with Harness(plugins) as harness:
        with pytest.warns(
            DeprecationWarning, match=r"Harness\.embed\(provider=\.\.\.\) is deprecated: pass route="
        ) as seen:
            old = await harness.embed(["hi"], provider="b")
        assert seen[0].filename == __file__
        new = await harness.embed(["hi"], route="b")
        assert (old.route, old[0].tolist()) == (new.route, new[0].tolist()) == ("b", new[0].tolist())
        with pytest.warns(DeprecationWarning, match=r"Harness\.embed\(provider="):
            replaced = await harness.embed(EmbedOptions(inputs=["hi"], route="a"), provider="b")
        assert replaced.route == "b"
        with pytest.raises(TypeError, match=r"Harness\.embed: give route= only"):
            await harness.embed(["hi"], provider="a", route="b")


async def test_mock_embedding_errors() -> None:
    adapter = MockAdapter(MockConfig(error="RATE_LIMITED"))
    with pytest.raises(LlmError, match="scripted mock error"):
        await adapter.embed(EmbedOptions(inputs=["a"]))
    for options, code in (
        (EmbedOptions(inputs=["a"], model="x"), "NOT_FOUND"),
        (EmbedOptions(inputs=["a"], dimensions=5000), "BAD_REQUEST"),
    ):
        with pytest.raises(LlmError) as caught:
            await MockAdapter(MockConfig()).embed(options)
        assert caught.value.code == code
    assert [m.model for m in await adapter.list_embedding_models()] == ["hash"]
    assert (await MockAdapter(MockConfig(routes=[])).list_embedding_models())[0].route is None


async def test_inputs_are_sent_in_batches_of_the_adapter_limit_and_joined() -> None:
    adapter = Recording()
    async with Harness([("vec", EmbedOnly(adapter))]) as harness:
        result = await harness.embed(["a", "bb", "ccc", "dddd", "eeeee"], model="m1")
        empty = await harness.embed(EmbedOptions(inputs=[]))
    assert adapter.batches == [["a", "bb"], ["ccc", "dddd"], ["eeeee"]]
    assert result.tolist() == [[1.0], [2.0], [3.0], [4.0], [5.0]]
    assert (result.usage, result.model, result.route, result.source) == (TokenUsage(3, None), "m1", "vec", "vec")
    assert len(empty) == 0
    assert empty.route == "vec"
    assert empty.model is None
    assert adapter.closed == 1


class Both(EmbedOnly):
    @hookimpl
    def register_adapter(self, register: RegisterAdapter) -> None:
        register(self.routes, MockAdapter(MockConfig()))


async def test_route_errors_name_the_route() -> None:
    plugins: list[tuple[str, object]] = [
        ("mock", MockPlugin(MockConfig(routes=["chat"]))),
        ("vec", EmbedOnly(Recording())),
    ]
    async with Harness(plugins, defaults=Defaults(route="elsewhere")) as harness:
        assert harness.default_embed_route() is None  # the default route does not embed and two do not exist
        for route, code, text in (
            ("nowhere", "NO_ADAPTER", "no embedder serves route 'nowhere'; embedding routes: 'chat', 'vec'"),
            (None, "NO_ADAPTER", "no route given and no default embedding route"),
        ):
            with pytest.raises(LlmError, match=text) as caught:
                await harness.embed(["x"], route=route)
            assert caught.value.code == code
    async with Harness([("mock", MockPlugin(MockConfig(routes=["vec"]))), ("chat", Both(Recording(), ["x"]))]) as h:
        assert h.default_embed_route() is None
    only_chat: list[tuple[str, object]] = [("only", OnlyChat())]
    async with Harness(only_chat) as harness:
        with pytest.raises(LlmError, match="route 'talk' does not serve embeddings; embedding routes: none") as caught:
            await harness.embed(["x"], route="talk")
        assert caught.value.code == "UNSUPPORTED"
    failed = PluginFailure(
        key="gone", name="gone", message="missing key", stage="config", is_middleware=False, routes=["g"]
    )
    async with Harness([], failures=[failed]) as harness:
        with pytest.raises(LlmError, match="route 'g' is unavailable: missing key") as caught:
            await harness.embed(["x"], route="g")
        assert caught.value.code == "CONFIG"
    async with Harness([("vec", EmbedOnly(Recording()))], defaults=Defaults(route="vec")) as harness:
        assert harness.default_embed_route() == "vec"
    with pytest.raises(RuntimeError, match="not running"):
        await Harness().embed(["x"])


class OnlyChat:
    @hookimpl
    def register_adapter(self, register: RegisterAdapter) -> None:
        register(["talk"], MockAdapter(MockConfig()))


async def test_adapter_faults_are_classified_and_scrubbed() -> None:
    secret = "sk-" + "z" * 24  # built at run time: no key-shaped literal
    cases: list[tuple[Any, str, str]] = [
        (LlmError("AUTH", f"bad key {secret}", status=401), "AUTH", "bad key"),
        (ValueError("boom"), "INTERNAL", "unexpected ValueError in the embedder of route 'vec': boom"),
        (vectors([1.0]), "PROTOCOL", "returned 1 vectors for 2 inputs"),
    ]
    for answer, code, text in cases:
        plugin = EmbedOnly(Recording(answer))
        redactor = Redactor()
        redactor.add(secret)
        async with Harness([("vec", plugin)], redact=redactor) as harness:
            with pytest.raises(LlmError, match=text) as caught:
                await harness.embed(["a", "b"])
        assert caught.value.code == code
        assert secret not in str(caught.value)


async def test_registration_rules() -> None:
    class Twice(EmbedOnly):
        @hookimpl
        def register_embedder(self, register: RegisterEmbedder) -> None:
            register(["vec"], self.adapter)
            register(["vec"], self.adapter)

    class Wrong(EmbedOnly):
        @hookimpl
        def register_embedder(self, register: RegisterEmbedder) -> None:
            register(["w"], MockConfig())  # type: ignore[arg-type]

    async with Harness(
        [("twice", Twice(Recording())), ("wrong", Wrong(Recording())), ("mock", MockPlugin(MockConfig()))]
    ) as harness:
        messages = {f.key: f.message for f in harness.failures}
        assert harness.embed_routes() == {"mock": "mock"}
    assert "DUPLICATE_ROUTE" in messages["twice"]
    assert "expected an EmbeddingAdapter instance" in messages["wrong"]
    assert await Recording().list_embedding_models() == []
    await EmbeddingAdapter.aclose(Recording())


# ------------------------------------------------------------------ llm_embed middleware


class Doubler:
    """Middleware: asks for model ``m2`` and doubles every float of the result."""

    def __init__(self) -> None:
        self.seen: list[EmbedOptions] = []

    @hookimpl(tryfirst=True)
    async def llm_embed(self, options: EmbedOptions, call_next: EmbedCallNext) -> Embeddings:
        self.seen.append(options)
        result = await call_next(options)
        result.data = array("f", [x * 2 for x in result.data])
        return result


class Renamer:
    @hookimpl
    async def llm_embed(self, options: EmbedOptions, call_next: EmbedCallNext) -> Embeddings:
        import msgspec

        return await call_next(msgspec.structs.replace(options, model="m2"))


async def test_middleware_wraps_embedding_calls_in_tier_order() -> None:
    doubler = Doubler()
    adapter = Recording()
    plugins: list[tuple[str, object]] = [("rename", Renamer()), ("double", doubler), ("vec", EmbedOnly(adapter))]
    async with Harness(plugins) as harness:
        assert [(link.key, link.tier) for link in harness.embed_chain()] == [
            ("double", "tryfirst"),
            ("rename", "normal"),
        ]
        assert harness.chain() == []  # no stream middleware
        result = await harness.embed(["abc"])
    assert result.tolist() == [[6.0]]
    assert result.model == "m2"
    assert doubler.seen[0].model is None


async def test_bad_embedding_middleware_stops_the_start() -> None:
    class Sync:
        @hookimpl
        def llm_embed(self, options: EmbedOptions, call_next: EmbedCallNext) -> Any:
            return call_next(options)

    class Wrapper:
        @hookimpl(wrapper=True)
        def llm_embed(self, options: EmbedOptions, call_next: EmbedCallNext) -> Any:
            return (yield)

    for plugin, text in (
        (Sync(), "llm_embed must be a coroutine function"),
        (Wrapper(), "llm_embed may not be a wrapper"),
    ):
        with pytest.raises(LlmError, match=text):
            async with Harness([("bad", plugin)]):
                pass  # pragma: no cover - the start fails


async def test_list_embedding_models_names_the_route() -> None:
    secret = "sk-" + "m" * 24  # built at run time: no key-shaped literal

    class Listing(Recording):
        async def list_embedding_models(self) -> list[ModelInfo]:
            return [ModelInfo(model=f"proxy-{secret}")]

    plugins: list[tuple[str, object]] = [("vec", EmbedOnly(Listing())), ("only", OnlyChat())]
    redactor = Redactor()
    redactor.add(secret)
    async with Harness(plugins, redact=redactor) as harness:
        assert await harness.list_embedding_models() == [ModelInfo(model=f"proxy-{MASK}", route="vec")]
        assert await harness.list_embedding_models("vec") == await harness.list_embedding_models()
        with pytest.raises(LlmError, match="route 'talk' does not serve embeddings") as caught:
            await harness.list_embedding_models("talk")
        assert caught.value.code == "UNSUPPORTED"
        with pytest.raises(LlmError, match="no embedder serves route 'nowhere'") as caught:
            await harness.list_embedding_models("nowhere")
        assert caught.value.code == "NO_ADAPTER"
    async with Harness([("vec", EmbedOnly(Recording()))]) as harness:
        assert await harness.list_embedding_models("vec") == []  # the default: an embedder lists none

    class Failing(Recording):
        async def list_embedding_models(self) -> list[ModelInfo]:
            raise LlmError("AUTH", f"key {secret} refused")

    async with Harness([("vec", EmbedOnly(Failing()))], redact=redactor) as harness:
        with pytest.raises(LlmError, match="refused") as caught:
            await harness.list_embedding_models("vec")
        assert secret not in str(caught.value)
    with pytest.raises(RuntimeError, match="not running"):
        await Harness().list_embedding_models()
