"""The real-model zoo of the benchmark: torchvision resnet18, mobilenet_v2 and
efficientnet_b0 (random weights, 10 classes, 3x64x64 images), Hugging Face BERT and
GPT-2 in small configurations (hidden 128, 2 layers, 2 heads, vocabulary 1000, 64
tokens; a 10-class sequence classifier and a language-model head, `.logits` returned)
and the test zoo's LSTM classifier (two LSTMs over 10 embedded tokens, 4 classes).

torchvision is imported through the test zoo's `import_torchvision` (the registry
serves a CUDA build of it whose compiled ops do not load with the CPU torch; see
test/models/zoo.py). That module is loaded from its file under the name `test_zoo`:
bench/ has a `zoo` of its own.

Batch sizes: every model at 1 and 32; batch 256 where a measurement fits the time
budget of `make bench` on 2 cores (one training step of resnet18 at 256 takes seconds
in torch alone, and each side makes at least 8 calls).
"""

from __future__ import annotations

import importlib.util
import os
import sys

import torch
import transformers
from models import CLASSES, Spec

_TEST_ZOO = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                         "test", "models", "zoo.py")
_spec = importlib.util.spec_from_file_location("test_zoo", _TEST_ZOO)
test_zoo = importlib.util.module_from_spec(_spec)
sys.modules["test_zoo"] = test_zoo  # dataclasses look their module up
_spec.loader.exec_module(test_zoo)
torchvision = test_zoo.import_torchvision()

VOCAB, TOKENS, HIDDEN = 1000, 64, 128


class Logits(torch.nn.Module):
    """A Hugging Face model called on token ids, its `.logits` returned."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, ids):
        return self.model(input_ids=ids).logits


class TokenLoss(torch.nn.Module):
    """A language model's logits and their cross-entropy over every token."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, ids, labels):
        logits = self.model(ids)
        return logits, torch.nn.functional.cross_entropy(logits.flatten(0, 1),
                                                         labels.flatten())


class BertClassifier(torch.nn.Module):
    """A BERT sequence classifier of `config` on token ids: its logits, and their
    cross-entropy with labels (`bert_compile`'s model)."""

    def __init__(self, config: transformers.BertConfig) -> None:
        super().__init__()
        self.model = transformers.BertForSequenceClassification(config)

    def forward(self, ids, labels=None):
        logits = self.model(input_ids=ids).logits
        if labels is None:
            return logits
        return logits, torch.nn.functional.cross_entropy(logits, labels)


def _bert() -> torch.nn.Module:
    config = transformers.BertConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=4 * HIDDEN,
                                     max_position_embeddings=TOKENS, num_labels=CLASSES)
    return Logits(transformers.BertForSequenceClassification(config))


def _gpt2() -> torch.nn.Module:
    config = transformers.GPT2Config(vocab_size=VOCAB, n_positions=TOKENS, n_embd=HIDDEN,
                                     n_layer=2, n_head=2, use_cache=False,
                                     bos_token_id=0, eos_token_id=0)
    return Logits(transformers.GPT2LMHeadModel(config))


def _images(size: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    return (torch.randn(size, 3, 64, 64, generator=generator),
            torch.randint(0, CLASSES, (size,), generator=generator))


def _tokens(classes: int | None, length: int = TOKENS, vocab: int = VOCAB):
    """Token ids of `length` and a label per sequence (`classes`) or per token (None)."""
    def make(size: int) -> tuple[torch.Tensor, torch.Tensor]:
        generator = torch.Generator().manual_seed(1)
        ids = torch.randint(0, vocab, (size, length), generator=generator)
        shape = (size,) if classes else (size, length)
        return ids, torch.randint(0, classes or vocab, shape, generator=generator)
    return make


def _resnet_stages(m):
    return [m.conv1, m.layer1, m.layer2, m.layer3, m.layer4, m.fc]


def _features_stages(m):
    return [*m.features, m.classifier]


def _bert_stages(m):
    bert = m.model.bert
    return [bert.embeddings, *bert.encoder.layer, m.model.classifier]


def _gpt2_stages(m):
    gpt = m.model.transformer
    return [gpt.wte, *gpt.h, m.model.lm_head]


def _lstm_stages(m):
    return [m.embed, m.lstm1, m.lstm2, m.head]


_CNN_BATCHES = {"inference_batches": (1, 32, 256), "training_batches": (1, 32),
                "inductor_inference": (), "inductor_training": ()}
_SEQUENCE = {"inductor_inference": (32,), "inductor_training": ()}

SPECS = {spec.name: spec for spec in [
    Spec("resnet18", lambda: torchvision.models.resnet18(num_classes=CLASSES), _images,
         _resnet_stages, **_CNN_BATCHES),
    Spec("mobilenet_v2", lambda: torchvision.models.mobilenet_v2(num_classes=CLASSES),
         _images, _features_stages, **_CNN_BATCHES),
    Spec("efficientnet_b0", lambda: torchvision.models.efficientnet_b0(num_classes=CLASSES),
         _images, _features_stages, **_CNN_BATCHES),
    Spec("bert", _bert, _tokens(CLASSES), _bert_stages, **_SEQUENCE),
    Spec("gpt2", _gpt2, _tokens(None), _gpt2_stages, loss=TokenLoss, **_SEQUENCE),
    Spec("lstm_classifier", test_zoo.LSTMClassifier, _tokens(4, length=10, vocab=50),
         _lstm_stages, **_SEQUENCE),
]}
