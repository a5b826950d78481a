"""Code <-> name vocabularies of the synthetic H&M article and customer tables.

Shaped like the real files' vocabularies (numeric codes paired with fixed names, a
department nested in a section and an index, an index in an index group), so that a
loader or encoder that works here meets the same kinds of values on the real data.
Every code maps to exactly one name.
"""

from __future__ import annotations

from typing import NamedTuple


class IndexInfo(NamedTuple):
    code: str
    name: str
    group_no: int
    group_name: str


class Department(NamedTuple):
    no: int
    name: str
    index_code: str
    section_no: int
    section_name: str
    garment_group_no: int
    product_types: tuple[int, ...]
    churn_effect: float  # added to a buyer's dormancy log-odds: what someone buys predicts leaving


class Colour(NamedTuple):
    code: int
    name: str
    value_id: int
    master_id: int
    weight: float  # share of articles


INDEX_GROUPS: tuple[str, ...] = ("Ladieswear", "Divided", "Menswear", "Baby/Children", "Sport")
INDEX_GROUP_SHARE: tuple[float, ...] = (0.45, 0.15, 0.13, 0.19, 0.08)

INDEXES: tuple[IndexInfo, ...] = (
    IndexInfo("A", "Ladieswear", 1, "Ladieswear"),
    IndexInfo("B", "Lingeries/Tights", 1, "Ladieswear"),
    IndexInfo("C", "Ladies Accessories", 1, "Ladieswear"),
    IndexInfo("D", "Divided", 2, "Divided"),
    IndexInfo("F", "Menswear", 3, "Menswear"),
    IndexInfo("G", "Baby Sizes 50-98", 4, "Baby/Children"),
    IndexInfo("H", "Children Sizes 92-140", 4, "Baby/Children"),
    IndexInfo("I", "Children Sizes 134-170", 4, "Baby/Children"),
    IndexInfo("J", "Children Accessories, Swimwear", 4, "Baby/Children"),
    IndexInfo("S", "Sport", 26, "Sport"),
)

# product_type_no -> (product_type_name, product_group_name, typical price)
PRODUCT_TYPES: dict[int, tuple[str, str, float]] = {
    253: ("Vest top", "Garment Upper body", 0.012),
    255: ("T-shirt", "Garment Upper body", 0.014),
    254: ("Top", "Garment Upper body", 0.018),
    252: ("Sweater", "Garment Upper body", 0.034),
    245: ("Shirt", "Garment Upper body", 0.030),
    258: ("Blouse", "Garment Upper body", 0.030),
    257: ("Cardigan", "Garment Upper body", 0.034),
    308: ("Hoodie", "Garment Upper body", 0.030),
    264: ("Jacket", "Garment Upper body", 0.060),
    262: ("Coat", "Garment Upper body", 0.085),
    256: ("Blazer", "Garment Upper body", 0.060),
    272: ("Trousers", "Garment Lower body", 0.034),
    274: ("Shorts", "Garment Lower body", 0.020),
    275: ("Skirt", "Garment Lower body", 0.025),
    273: ("Leggings/Tights", "Garment Lower body", 0.016),
    265: ("Dress", "Garment Full body", 0.034),
    85: ("Jumpsuit/Playsuit", "Garment Full body", 0.034),
    267: ("Bodysuit", "Garment Full body", 0.012),
    268: ("Garment Set", "Garment Full body", 0.025),
    306: ("Bra", "Underwear", 0.022),
    286: ("Underwear bottom", "Underwear", 0.008),
    296: ("Underwear body", "Underwear", 0.025),
    302: ("Socks", "Socks & Tights", 0.007),
    304: ("Underwear Tights", "Socks & Tights", 0.010),
    59: ("Swimwear bottom", "Swimwear", 0.014),
    298: ("Bikini top", "Swimwear", 0.018),
    60: ("Swimsuit", "Swimwear", 0.030),
    291: ("Pyjama set", "Nightwear", 0.025),
    288: ("Night gown", "Nightwear", 0.020),
    67: ("Belt", "Accessories", 0.014),
    87: ("Hat/beanie", "Accessories", 0.012),
    70: ("Scarf", "Accessories", 0.016),
    72: ("Earring", "Accessories", 0.008),
    74: ("Hair clip", "Accessories", 0.006),
    80: ("Sunglasses", "Accessories", 0.014),
    66: ("Bag", "Bags", 0.030),
    91: ("Sneakers", "Shoes", 0.050),
    95: ("Boots", "Shoes", 0.070),
    93: ("Sandals", "Shoes", 0.035),
}

# Seasonal popularity per product group: (amplitude, day of year of the peak).
GROUP_SEASON: dict[str, tuple[float, int]] = {
    "Swimwear": (0.85, 190),
    "Shoes": (0.15, 100),
    "Accessories": (0.2, 340),
    "Garment Upper body": (0.15, 330),
    "Garment Full body": (0.3, 170),
}

GARMENT_GROUPS: dict[int, str] = {
    1002: "Jersey Basic",
    1003: "Knitwear",
    1005: "Jersey Fancy",
    1006: "Woven/Jersey/Knitted mix Baby",
    1007: "Outdoor",
    1008: "Dressed",
    1009: "Trousers",
    1010: "Blouses",
    1011: "Shirts",
    1013: "Dresses Ladies",
    1014: "Dresses/Skirts girls",
    1016: "Trousers Denim",
    1017: "Under-, Nightwear",
    1018: "Swimwear",
    1019: "Accessories",
    1020: "Shoes",
    1021: "Socks and Tights",
    1023: "Special Offers",
}

_D = Department
DEPARTMENTS: tuple[Department, ...] = (
    _D(1676, "Jersey Basic", "A", 16, "Womens Everyday Basics", 1002, (253, 255, 254, 267), 0.0),
    _D(1643, "Jersey fancy", "A", 15, "Womens Everyday Collection", 1005, (254, 255, 308), 0.0),
    _D(1747, "Trousers", "A", 15, "Womens Everyday Collection", 1009, (272, 274), -0.2),
    _D(1722, "Denim Trousers", "A", 15, "Womens Everyday Collection", 1016, (272, 274, 275), 0.0),
    _D(1636, "Blouse", "A", 15, "Womens Everyday Collection", 1010, (258, 245), -0.3),
    _D(1641, "Dresses", "A", 18, "Womens Trend", 1013, (265, 85), 0.4),
    _D(1612, "Knitwear", "A", 18, "Womens Trend", 1003, (252, 257), 0.0),
    _D(1717, "Outdoor", "A", 11, "Womens Tailoring", 1007, (264, 262, 256), -0.4),
    _D(1515, "Tailoring", "A", 11, "Womens Tailoring", 1008, (256, 272, 275, 265), -0.6),
    _D(1339, "Clean Lingerie", "B", 61, "Womens Lingerie", 1017, (306, 286), -0.5),
    _D(1338, "Expressive Lingerie", "B", 61, "Womens Lingerie", 1017, (306, 286, 296), 0.3),
    _D(3608, "Tights basic", "B", 62, "Womens Nightwear, Socks & Tigh", 1021, (304, 302), -0.7),
    _D(1334, "Nightwear", "B", 62, "Womens Nightwear, Socks & Tigh", 1017, (291, 288), 0.0),
    _D(1310, "Swimwear", "B", 60, "Womens Swimwear, beachwear", 1018, (59, 298, 60), 0.8),
    _D(3209, "Small Accessories", "C", 65, "Womens Small accessories", 1019, (72, 74, 67), 0.5),
    _D(3210, "Big Accessories", "C", 66, "Womens Big accessories", 1019, (66, 70, 87, 80), 0.2),
    _D(3611, "Shoes", "C", 64, "Womens Shoes", 1020, (91, 95, 93), 0.0),
    _D(1919, "Divided Basics", "D", 51, "Divided Basics", 1002, (253, 255, 273), 0.6),
    _D(1914, "Divided Projects", "D", 53, "Divided Collection", 1005, (254, 265, 275), 1.0),
    _D(1930, "Divided Trousers", "D", 53, "Divided Collection", 1016, (272, 274), 0.6),
    _D(1936, "Divided Knitwear", "D", 53, "Divided Collection", 1003, (252, 257), 0.5),
    _D(1944, "Divided Accessories", "D", 52, "Divided Accessories", 1019, (72, 87, 66), 1.0),
    _D(1901, "Divided Selected", "D", 50, "Divided Selected", 1023, (254, 272, 265), 1.6),
    _D(5883, "Men Basics", "F", 26, "Men Underwear", 1002, (255, 253, 286, 302), -0.6),
    _D(5828, "Men Shirts", "F", 21, "Contemporary Smart", 1011, (245,), -0.3),
    _D(5839, "Men Trousers", "F", 21, "Contemporary Smart", 1009, (272, 274), -0.3),
    _D(5850, "Men Denim", "F", 22, "Contemporary Casual", 1016, (272, 274), 0.0),
    _D(5861, "Men Knitwear", "F", 22, "Contemporary Casual", 1003, (252, 308, 257), 0.0),
    _D(5872, "Men Outerwear", "F", 25, "Mens Outerwear", 1007, (264, 262), -0.2),
    _D(5894, "Men Accessories", "F", 27, "Men Accessories", 1019, (67, 87, 70, 91), 0.3),
    _D(6515, "Baby basics", "G", 44, "Baby Essentials & Complements", 1006, (267, 268, 273), -1.0),
    _D(6524, "Baby Girl", "G", 41, "Baby Girl", 1006, (265, 268, 257), -0.8),
    _D(6533, "Baby Boy", "G", 42, "Baby Boy", 1006, (268, 272, 255), -0.8),
    _D(7616, "Kids Girl Jersey", "H", 46, "Kids Girl", 1005, (254, 265, 273), -0.6),
    _D(7623, "Kids Boy Jersey", "H", 47, "Kids Boy", 1005, (255, 308, 272), -0.6),
    _D(7635, "Kids Outerwear", "H", 48, "Kids Outerwear", 1007, (264, 262), -0.4),
    _D(8310, "Young Girl Trend", "I", 43, "Young Girl", 1014, (265, 275, 254), 0.2),
    _D(8316, "Young Boy Trend", "I", 45, "Young Boy", 1005, (255, 308, 272), 0.0),
    _D(8852, "Kids Swimwear", "J", 77, "Kids Accessories, Swimwear & D", 1018, (60, 59), 0.4),
    _D(8858, "Kids Accessories", "J", 77, "Kids Accessories, Swimwear & D", 1019, (87, 74, 302), -0.2),
    _D(8559, "Ladies Sport Bras", "S", 5, "Ladies H&M Sport", 1017, (306, 273), 0.3),
    _D(8568, "Ladies Sport Bottoms", "S", 5, "Ladies H&M Sport", 1002, (273, 274), 0.3),
    _D(8577, "Men Sport Tops", "S", 57, "Men H&M Sport", 1005, (255, 308), 0.2),
    _D(8586, "Sport Accessories", "S", 8, "H&M Sport Accessories", 1019, (66, 87, 302), 0.6),
)

PERCEIVED_VALUES: dict[int, str] = {
    1: "Dark",
    2: "Light",
    3: "Dusty Light",
    4: "Medium Dusty",
    5: "Bright",
    7: "Medium",
}
PERCEIVED_MASTERS: dict[int, str] = {
    5: "Black",
    9: "White",
    2: "Blue",
    4: "Pink",
    12: "Grey",
    18: "Red",
    11: "Beige",
    19: "Green",
    3: "Khaki green",
    13: "Brown",
    8: "Yellow",
    7: "Orange",
    15: "Lilac Purple",
    20: "Turquoise",
    14: "Metal",
}

_C = Colour
COLOURS: tuple[Colour, ...] = (
    _C(9, "Black", 1, 5, 0.20),
    _C(10, "White", 2, 9, 0.08),
    _C(11, "Off White", 3, 9, 0.05),
    _C(6, "Light Grey", 2, 12, 0.03),
    _C(7, "Grey", 7, 12, 0.02),
    _C(8, "Dark Grey", 1, 12, 0.03),
    _C(71, "Light Blue", 2, 2, 0.04),
    _C(72, "Blue", 7, 2, 0.04),
    _C(73, "Dark Blue", 1, 2, 0.07),
    _C(51, "Light Pink", 2, 4, 0.04),
    _C(52, "Pink", 7, 4, 0.03),
    _C(53, "Dark Pink", 1, 4, 0.01),
    _C(42, "Red", 5, 18, 0.03),
    _C(43, "Dark Red", 1, 18, 0.02),
    _C(12, "Light Beige", 3, 11, 0.04),
    _C(13, "Beige", 4, 11, 0.03),
    _C(62, "Light Green", 2, 19, 0.01),
    _C(63, "Green", 7, 19, 0.02),
    _C(19, "Greenish Khaki", 4, 3, 0.02),
    _C(17, "Yellowish Brown", 4, 13, 0.02),
    _C(15, "Dark Beige", 1, 13, 0.02),
    _C(21, "Light Yellow", 2, 8, 0.02),
    _C(23, "Dark Yellow", 7, 8, 0.01),
    _C(33, "Orange", 5, 7, 0.02),
    _C(91, "Light Purple", 2, 15, 0.01),
    _C(81, "Light Turquoise", 2, 20, 0.01),
    _C(3, "Silver", 7, 14, 0.01),
    _C(5, "Gold", 5, 14, 0.01),
)

# graphical_appearance_no -> (name, share of products)
APPEARANCES: dict[int, tuple[str, float]] = {
    1010016: ("Solid", 0.46),
    1010001: ("All over pattern", 0.14),
    1010010: ("Melange", 0.05),
    1010017: ("Stripe", 0.07),
    1010008: ("Front print", 0.06),
    1010004: ("Check", 0.03),
    1010014: ("Lace", 0.03),
    1010005: ("Colour blocking", 0.02),
    1010009: ("Glittering/Metallic", 0.02),
    1010007: ("Embroidery", 0.02),
    1010023: ("Denim", 0.05),
    1010021: ("Other pattern", 0.05),
}

CLUB_STATUSES: tuple[str, ...] = ("", "ACTIVE", "PRE-CREATE", "LEFT CLUB")
CLUB_SHARE: tuple[float, ...] = (0.006, 0.926, 0.058, 0.01)
NEWS_FREQUENCIES: tuple[str, ...] = ("", "NONE", "Regularly", "Monthly")
AGE_BAND_EDGES: tuple[int, ...] = (25, 40, 60)  # bands: <25, 25-39, 40-59, 60+ (and missing)
