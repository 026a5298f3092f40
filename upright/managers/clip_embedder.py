"""CLIP embeddings of rendered frames and prompts for :mod:`upright.managers.vlm_reward`, with ``transformers``'
``CLIPModel`` (``pip install 'upright[vlm]'``).

Models are named as ``transformers`` names them on the Hugging Face Hub (``openai/clip-vit-base-patch32``) or are a
folder written by ``save_pretrained``. Loading looks in the Hugging Face cache first (``HF_HOME``, default
``~/.cache/huggingface``) without touching the network; only a model that is not cached is downloaded, and where that
cannot happen (``HF_HUB_OFFLINE=1``, no network) :class:`CLIPWeightsNotFoundError` says in one line how to fetch it.

Frames are preprocessed on the model's device in torch, as the model's own image processor
(``preprocessor_config.json``, read with ``CLIPImageProcessorPil``) does on PIL images: bicubic resize of the
shorter side, centre crop, scale to [0, 1], normalise by the processor's mean and std. Without a processor file the
model's input size and ``transformers``' OpenAI CLIP mean/std (``OPENAI_CLIP_MEAN``, ``OPENAI_CLIP_STD``) are used.

:func:`save_random_clip` writes a CLIP of the library's architecture with random weights and a byte-level tokenizer
(no download): the tests and ``benchmarks/vlm_reward_cost.py`` use it.
"""

from __future__ import annotations

import pathlib

import torch

from upright.robots.menagerie import ModelNotFoundError


class CLIPWeightsNotFoundError(ModelNotFoundError):
    """A CLIP model is neither in the Hugging Face cache nor downloadable (``train.py`` prints it as one line)."""


def _import_transformers():
    try:
        import transformers
    except ImportError as err:
        raise RuntimeError(f"env.vlm_reward needs transformers ({err}); pip install 'upright[vlm]'") from err
    return transformers


def _first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0]


def from_pretrained(loader, name: str, what: str, prefix: str = "env.vlm_reward.model", **kwargs):
    """``loader(name, **kwargs)`` (a ``from_pretrained``) from the Hugging Face cache, else downloaded.

    Raises:
        CLIPWeightsNotFoundError: a folder without the file, or a Hub model neither cached nor downloadable (offline or
            no network); one line saying how to fetch it.
    """
    from huggingface_hub import constants

    try:
        return loader(name, local_files_only=True, **kwargs)
    except OSError as err:
        cached_err = err
    if pathlib.Path(name).exists():
        raise CLIPWeightsNotFoundError(
            f"{prefix}={name!r} is a folder without a loadable {what} "
            f"({_first_line(cached_err)}); write it with save_pretrained"
        ) from cached_err
    fetch = (
        f"on a machine with internet run `hf download {name}` (huggingface_hub's CLI; older versions: "
        f"`huggingface-cli download {name}`) and copy its cache to {constants.HF_HUB_CACHE}"
    )
    if constants.HF_HUB_OFFLINE:
        raise CLIPWeightsNotFoundError(
            f"{prefix}={name!r}: its {what} is not in the Hugging Face cache and "
            f"HF_HUB_OFFLINE=1 forbids downloading it; {fetch}, or unset "
            "HF_HUB_OFFLINE"
        ) from cached_err
    try:
        return loader(name, **kwargs)
    except OSError as err:
        raise CLIPWeightsNotFoundError(
            f"{prefix}={name!r}: its {what} is not in the Hugging Face cache and could "
            f"not be downloaded ({_first_line(err)}); {fetch}"
        ) from err


class ClipEmbedder:
    """A ``transformers`` CLIP model on ``device``: L2-normalised embeddings of prompts (once per prompt) and frames.

    Args:
        name: model name on the Hub or a ``save_pretrained`` folder.
        device: torch device of the model and of the returned embeddings.
        dtype: ``float32``, ``bfloat16`` or ``float16`` (weights and activations; embeddings are returned in float32).
        batch_size: frames per forward pass.
        cpu_threads: torch threads of the image forward pass on the CPU; 0 keeps the caller's (``train.py`` collects
            with 1 thread, :mod:`upright.training.runner`). More threads than free cores slow it down badly: with
            two other processes busy on a 2-core CPU, 2 threads took a small CLIP's forward from 0.4 ms to 280 ms.
        prefix: config key named in errors.

    Raises:
        RuntimeError: transformers is not installed.
        CLIPWeightsNotFoundError: see :func:`from_pretrained`.
        ValueError: the model is not a CLIP model (``config.model_type`` is not ``clip``).
    """

    def __init__(
        self,
        name: str,
        device: torch.device | str = "cpu",
        dtype: str = "float32",
        batch_size: int = 256,
        cpu_threads: int = 0,
        prefix: str = "env.vlm_reward.model",
    ):
        tf = _import_transformers()
        tf.utils.logging.disable_progress_bar()
        self.name, self.device = str(name), torch.device(device)
        self.dtype = getattr(torch, dtype)
        self.batch_size, self.cpu_threads = int(batch_size), int(cpu_threads)
        config = from_pretrained(tf.AutoConfig.from_pretrained, self.name, "config.json", prefix)
        if getattr(config, "model_type", None) != "clip":
            raise ValueError(
                f"{prefix}={name!r} is a {getattr(config, 'model_type', '?')} model, not CLIP; name a "
                "CLIP model, e.g. openai/clip-vit-base-patch32"
            )
        self.model = from_pretrained(tf.CLIPModel.from_pretrained, self.name, "weights", prefix, dtype=self.dtype)
        self.model.to(self.device).eval().requires_grad_(False)
        self.tokenizer = from_pretrained(tf.AutoTokenizer.from_pretrained, self.name, "tokenizer", prefix)
        self._image_settings(tf, prefix)
        self._texts: dict[str, torch.Tensor] = {}

    def _image_settings(self, tf, prefix: str) -> None:
        """Input size, crop and normalisation of the model's image processor (library defaults without one)."""
        from transformers.image_utils import OPENAI_CLIP_MEAN, OPENAI_CLIP_STD

        size = int(self.model.config.vision_config.image_size)
        self.shortest_edge, self.crop = size, (size, size)
        mean, std = OPENAI_CLIP_MEAN, OPENAI_CLIP_STD
        try:
            proc = from_pretrained(tf.CLIPImageProcessorPil.from_pretrained, self.name, "image processor", prefix)
        except CLIPWeightsNotFoundError:
            proc = None  # a model folder without preprocessor_config.json: the model's input size, OpenAI's mean/std
        if proc is not None:
            if proc.do_resize and proc.size.shortest_edge:
                self.shortest_edge = int(proc.size.shortest_edge)
            if proc.do_center_crop and proc.crop_size.height:
                self.crop = (int(proc.crop_size.height), int(proc.crop_size.width))
            mean, std = proc.image_mean, proc.image_std
        self.mean = torch.tensor(mean, dtype=torch.float32, device=self.device).view(1, 3, 1, 1)
        self.std = torch.tensor(std, dtype=torch.float32, device=self.device).view(1, 3, 1, 1)

    @staticmethod
    def _features(out) -> torch.Tensor:
        """The projected embedding of ``get_*_features`` (transformers 5: ``pooler_output``; 4.x: the tensor)."""
        return out if isinstance(out, torch.Tensor) else out.pooler_output

    @torch.inference_mode()
    def text(self, prompt: str) -> torch.Tensor:
        """(D,) float32 L2-normalised embedding of ``prompt``, computed once per prompt and kept."""
        if prompt not in self._texts:
            max_len = int(self.model.config.text_config.max_position_embeddings)
            tokens = self.tokenizer([prompt], padding=True, truncation=True, max_length=max_len, return_tensors="pt")
            tokens = {k: v.to(self.device) for k, v in tokens.items() if k in ("input_ids", "attention_mask")}
            emb = self._features(self.model.get_text_features(**tokens))[0].float()
            self._texts[prompt] = torch.nn.functional.normalize(emb, dim=-1)
        return self._texts[prompt]

    def preprocess(self, frames: torch.Tensor) -> torch.Tensor:
        """(N, 3, h, w) model input of (N, H, W, 3) uint8 RGB ``frames``: shorter side resized to the processor's
        ``shortest_edge`` (bicubic, antialiased; skipped when it already is), centre crop (h, w), /255, normalised;
        on the model's device and dtype."""
        x = frames.to(self.device).permute(0, 3, 1, 2).float() / 255.0
        h, w = x.shape[-2:]
        short = self.shortest_edge
        size = (short, int(short * w / h)) if h <= w else (int(short * h / w), short)
        if size != (h, w):
            x = torch.nn.functional.interpolate(x, size=size, mode="bicubic", antialias=True, align_corners=False)
            x = x.clamp(0.0, 1.0)
            h, w = size
        ch, cw = self.crop
        top, left = max((h - ch) // 2, 0), max((w - cw) // 2, 0)
        x = x[:, :, top : top + ch, left : left + cw]
        return ((x - self.mean) / self.std).to(self.dtype)

    @torch.inference_mode()
    def images(self, frames: torch.Tensor) -> torch.Tensor:
        """(N, D) float32 L2-normalised embeddings of (N, H, W, 3) uint8 RGB ``frames``, in batches of
        ``batch_size``, on the model's device (on the CPU with ``cpu_threads`` torch threads when > 0, torch's
        count restored after)."""
        threads = torch.get_num_threads()
        if self.device.type == "cpu" and self.cpu_threads > 0:
            torch.set_num_threads(self.cpu_threads)
        try:
            out = []
            for chunk in frames.split(self.batch_size):
                emb = self._features(self.model.get_image_features(pixel_values=self.preprocess(chunk)))
                out.append(torch.nn.functional.normalize(emb.float(), dim=-1))
            return torch.cat(out)
        finally:
            torch.set_num_threads(threads)


def byte_level_vocab() -> dict[str, int]:
    """A CLIP BPE vocabulary without merges: the 256 byte symbols of GPT-2/CLIP's byte-to-unicode map, each also
    as a word end (``</w>``), then ``<|startoftext|>`` and ``<|endoftext|>`` (514 tokens)."""
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    chars = list(bytes_to_unicode().values())
    vocab = {c: i for i, c in enumerate(chars)}
    vocab.update({c + "</w>": len(chars) + i for i, c in enumerate(chars)})
    vocab["<|startoftext|>"], vocab["<|endoftext|>"] = len(vocab), len(vocab) + 1
    return vocab


def save_random_clip(path, config=None, seed: int = 0, image_processor: bool = True) -> pathlib.Path:
    """Write a ``CLIPModel`` with random weights, a byte-level ``CLIPTokenizer`` (:func:`byte_level_vocab`) and,
    when ``image_processor``, a ``CLIPImageProcessorPil`` sized to the model, to ``path`` (nothing downloaded).

    Args:
        path: folder (created).
        config: a ``CLIPConfig``; default ``CLIPConfig()``, the architecture of ``openai/clip-vit-base-patch32``
            (ViT-B/32 at 224 px, 512-d embeddings). Its token ids are set to the tokenizer's.
        seed: torch seed of the weights.

    Returns:
        ``path`` as a Path, loadable as ``ClipEmbedder(str(path))``.
    """
    tf = _import_transformers()
    tf.utils.logging.disable_progress_bar()
    path = pathlib.Path(path)
    vocab = byte_level_vocab()
    config = config if config is not None else tf.CLIPConfig()
    text = config.text_config
    text.bos_token_id, text.eos_token_id = vocab["<|startoftext|>"], vocab["<|endoftext|>"]
    text.pad_token_id, text.vocab_size = vocab["<|endoftext|>"], max(int(text.vocab_size), len(vocab))
    torch.manual_seed(seed)
    tf.CLIPModel(config).eval().save_pretrained(path)
    tf.CLIPTokenizer(vocab=vocab, merges=[], model_max_length=int(text.max_position_embeddings)).save_pretrained(path)
    if image_processor:
        size = int(config.vision_config.image_size)
        proc = tf.CLIPImageProcessorPil(size={"shortest_edge": size}, crop_size={"height": size, "width": size})
        proc.save_pretrained(path)
    return path
