"""Product names and free-text descriptions for the synthetic articles.

Descriptions read like the real ``detail_desc`` column: a sentence or two with commas and
now and then a quoted word, so that CSV quoting is exercised; a few are empty, as in the
real file.
"""

from __future__ import annotations

import numpy as np

from training.synth.vocab import PRODUCT_TYPES

# fmt: off
_NAMES = (
    "Tilly", "Luna", "Jade", "Brooke", "Sara", "Timmy", "Alva", "Moa", "Ellie", "Greta", "Hugo",
    "Ivy", "Jonas", "Kim", "Lola", "Malte", "Nora", "Otto", "Pia", "Rut", "Sigge", "Tove", "Uma",
    "Vera", "Wilma", "Ylva", "Astrid", "Bo", "Cleo", "Dante", "Edith", "Frej", "Gunnel", "Hedda",
    "Ines",
)
# fmt: on
_STYLES = ("", "", "", "Slim", "Relaxed", "Oversized", "HW", "Basic", "Soft", "Wide", "Cropped", "Long")
_FITS = ("Fitted", "Relaxed-fit", "Oversized", "Short", "Long", "Slim-fit", "Loose-fit", "Straight-cut")
_MATERIALS = (
    "soft cotton jersey",
    "stretch denim",
    "rib-knit fabric",
    "woven fabric",
    "airy chiffon",
    "organic cotton",
    "recycled polyester",
    "fine-knit viscose",
    "washed linen",
    "thick sweatshirt fabric",
)
_FEATURES = (
    "a round neckline",
    "long sleeves",
    "short sleeves",
    "a V-neck",
    "side pockets",
    "an elasticated waist",
    "narrow shoulder straps",
    "a concealed zip",
    "buttons down the front",
    "ribbing at the cuffs and hem",
    'a "smocked" back',
    "a printed motif",
    "a lined hood",
    "adjustable straps",
    "a wrapover front",
    "press-studs at the crotch",
)


def name_products(rng: np.random.Generator, product_type: np.ndarray) -> np.ndarray:
    """``(P,)`` str product names like ``Tilly slim trousers``."""
    names = np.array(_NAMES)[rng.integers(len(_NAMES), size=len(product_type))]
    styles = np.array(_STYLES)[rng.integers(len(_STYLES), size=len(product_type))]
    nouns = {t: name.lower() for t, (name, _, _) in PRODUCT_TYPES.items()}
    return np.array(
        [
            f"{n} {s.lower()} {nouns[t]}" if s else f"{n} {nouns[t]}"
            for n, s, t in zip(names, styles, product_type.tolist(), strict=True)
        ]
    )


def describe_products(rng: np.random.Generator, product_type: np.ndarray) -> np.ndarray:
    """``(P,)`` str descriptions, some with commas and quotes; about 0.5% are empty."""
    n = len(product_type)
    fit = rng.integers(len(_FITS), size=n)
    material = rng.integers(len(_MATERIALS), size=n)
    feature = rng.integers(len(_FEATURES), size=(n, 2))
    extra = rng.random(n)
    empty = rng.random(n) < 0.005
    out = []
    for i, t in enumerate(product_type.tolist()):
        if empty[i]:
            out.append("")
            continue
        noun = PRODUCT_TYPES[t][0].lower()
        a, b = _FEATURES[feature[i, 0]], _FEATURES[feature[i, 1]]
        text = f"{_FITS[fit[i]]} {noun} in {_MATERIALS[material[i]]}"
        text += f" with {a}." if a == b else f", with {a} and {b}."
        if extra[i] < 0.3:
            text += " Unlined."
        out.append(text)
    return np.array(out)
