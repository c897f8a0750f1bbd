#include <criterion/criterion.h>
Test(base_config, placeholder) { cr_assert(1); }
