/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Who a container is, from annotations a pod cannot forge (docs/runtime-trust.md).
 *
 * CRI-O builds a container's annotations as: pod annotations, then its own
 * keys, then the kubelet's container annotations and labels, each overwriting.
 * So only the keys CRI-O or the kubelet always set are trustworthy; everything
 * else (including containerd's io.kubernetes.cri.* keys and
 * io.kubernetes.cri-o.Namespace, set only on sandboxes) may come from the pod.
 * containerd adds its own io.kubernetes.cri.* keys after the pod annotations
 * its runtime handler lets through, so those win.
 */
#include "hook.h"

#include "image_identity.h"

#include <stdlib.h>
#include <string.h>

/* CRI-O (set by CRI-O, or by the kubelet as a label copied in last). */
#define CRIO_MANAGER_KEY "io.container.manager"
#define CRIO_MANAGER_VALUE "cri-o"
#define CRIO_TYPE_KEY "io.kubernetes.cri-o.ContainerType"
#define CRIO_NAMESPACE_KEY "io.kubernetes.pod.namespace"
#define CRIO_POD_UID_KEY "io.kubernetes.pod.uid"
#define CRIO_IMAGE_NAME_KEY "io.kubernetes.cri-o.ImageName"
#define CRIO_IMAGE_KEY "io.kubernetes.cri-o.Image"
#define CRIO_IMAGE_REF_KEY "io.kubernetes.cri-o.ImageRef"
/* Not set by CRI-O: whatever is there came from the pod. Only ever a hint. */
#define CRIO_REPO_DIGESTS_KEY "io.kubernetes.cri-o.ImageRepoDigests"

/* containerd CRI plugin. */
#define CTRD_TYPE_KEY "io.kubernetes.cri.container-type"
#define CTRD_NAMESPACE_KEY "io.kubernetes.cri.sandbox-namespace"
#define CTRD_POD_UID_KEY "io.kubernetes.cri.sandbox-uid" /* containerd 1.6.11+, 1.7, 2.x */
#define CTRD_IMAGE_KEY "io.kubernetes.cri.image-name"

/* Both runtimes use these container-type values. */
#define TYPE_SANDBOX "sandbox"
#define TYPE_CONTAINER "container"

static int nonempty(const char *s) { return s && *s; }

/* A pod UID the runtime set, when it is one; anything else is no pod identity (not a denial:
 * it only means no pod binding can match). */
static const char *pod_uid(const hook_doc *ann, const char *key)
{
    const char *uid = hook_doc_map_get(ann, key);
    return pg_pod_uid_valid(uid) ? uid : NULL;
}

/* Sandbox, application container, or a type we do not know (deny). */
static int classify(const char *type, const char *key, hook_identity *id, pg_error *err)
{
    if (type && strcmp(type, TYPE_SANDBOX) == 0) {
        id->kind = HOOK_SANDBOX;
        return PG_OK;
    }
    if (type && strcmp(type, TYPE_CONTAINER) == 0) {
        id->kind = HOOK_APPLICATION;
        return PG_OK;
    }
    if (!type)
        return pg_fail(err, PG_ERR_INVALID, "annotation %s is missing", key);
    return pg_fail(err, PG_ERR_INVALID, "annotation %s has unknown value \"%.64s\"", key, type);
}

/*
 * CRI-O's ImageName may be empty (an image without a name); its Image is then
 * what the kubelet passed, which may be an image ID. An ID is not a name: the
 * image is then unknown and only a policy that needs no name can exempt it.
 */
static const char *crio_image(const hook_doc *ann)
{
    const char *name = hook_doc_map_get(ann, CRIO_IMAGE_NAME_KEY);
    if (nonempty(name))
        return name;
    const char *image = hook_doc_map_get(ann, CRIO_IMAGE_KEY);
    if (!nonempty(image) || pg_image_id_hex(image))
        return NULL;
    pg_ref *ref = pg_ref_parse(image, NULL);
    int is_name = ref != NULL;
    pg_ref_free(ref);
    return is_name ? image : NULL;
}

/* A trusted spelling other than the image itself; the library validates it. */
static void add_alias(hook_identity *id, const char *value)
{
    size_t n = 0;
    if (!nonempty(value) || (id->image && strcmp(value, id->image) == 0))
        return;
    while (id->aliases[n])
        if (strcmp(id->aliases[n++], value) == 0)
            return;
    if (n < HOOK_MAX_ALIASES)
        id->aliases[n] = value;
}

/*
 * A comma-separated list (what a pod could write there). Each item is passed
 * on as written (validated by the library: a malformed one denies), and
 * more than HOOK_MAX_HINTS is refused rather than silently cut.
 */
static int split_hints(const char *value, hook_identity *id, pg_error *err)
{
    if (!value)
        return PG_OK;
    size_t n = 1;
    for (const char *p = value; *p; p++)
        n += *p == ',';
    if (n > HOOK_MAX_HINTS)
        return pg_fail(err, PG_ERR_LIMIT, "annotation %s lists more than %d images",
                       CRIO_REPO_DIGESTS_KEY, HOOK_MAX_HINTS);
    id->hints = calloc(n + 1, sizeof *id->hints);
    if (!id->hints)
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    const char *p = value;
    for (size_t i = 0; i < n; i++) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (!(id->hints[i] = strndup(p, len)))
            return pg_fail(err, PG_ERR_NOMEM, "out of memory");
        p = end ? end + 1 : p + len;
    }
    return PG_OK;
}

void hook_identity_clear(hook_identity *id)
{
    pg_strv_free(id->hints);
    id->hints = NULL;
}

static int identify_crio(const hook_doc *ann, hook_identity *id, pg_error *err)
{
    id->runtime = PG_RUNTIME_CRIO;
    int rc = classify(hook_doc_map_get(ann, CRIO_TYPE_KEY), CRIO_TYPE_KEY, id, err);
    if (rc != PG_OK || id->kind == HOOK_SANDBOX)
        return rc;
    id->namespace_ = hook_doc_map_get(ann, CRIO_NAMESPACE_KEY);
    if (!nonempty(id->namespace_))
        return pg_fail(err, PG_ERR_INVALID, "annotation %s is missing", CRIO_NAMESPACE_KEY);
    id->pod_uid = pod_uid(ann, CRIO_POD_UID_KEY);
    id->image = crio_image(ann);
    const char *ref = hook_doc_map_get(ann, CRIO_IMAGE_REF_KEY);
    id->image_ref = nonempty(ref) ? ref : NULL;
    add_alias(id, hook_doc_map_get(ann, CRIO_IMAGE_KEY));
    add_alias(id, hook_doc_map_get(ann, CRIO_IMAGE_NAME_KEY));
    return split_hints(hook_doc_map_get(ann, CRIO_REPO_DIGESTS_KEY), id, err);
}

static int identify_containerd(const hook_doc *ann, hook_identity *id, pg_error *err)
{
    id->runtime = PG_RUNTIME_CONTAINERD;
    int rc = classify(hook_doc_map_get(ann, CTRD_TYPE_KEY), CTRD_TYPE_KEY, id, err);
    if (rc != PG_OK || id->kind == HOOK_SANDBOX)
        return rc;
    id->namespace_ = hook_doc_map_get(ann, CTRD_NAMESPACE_KEY);
    if (!nonempty(id->namespace_))
        return pg_fail(err, PG_ERR_INVALID, "annotation %s is missing", CTRD_NAMESPACE_KEY);
    id->pod_uid = pod_uid(ann, CTRD_POD_UID_KEY);
    const char *image = hook_doc_map_get(ann, CTRD_IMAGE_KEY);
    id->image = nonempty(image) ? image : NULL;
    id->image_ref = NULL; /* containerd names no image ID: resolved from the store */
    return PG_OK;
}

/*
 * auto: CRI-O always sets io.container.manager=cri-o after the pod's
 * annotations, so its presence wins over containerd keys (which a CRI-O pod
 * can inject). Under containerd a pod can only inject it if the runtime
 * handler's pod_annotations let it through (docs/runtime-trust.md).
 */
static pg_runtime detect_runtime(const hook_doc *ann)
{
    const char *manager = hook_doc_map_get(ann, CRIO_MANAGER_KEY);
    if (manager && strcmp(manager, CRIO_MANAGER_VALUE) == 0)
        return PG_RUNTIME_CRIO;
    if (hook_doc_map_get(ann, CTRD_TYPE_KEY))
        return PG_RUNTIME_CONTAINERD;
    return PG_RUNTIME_AUTO;
}

static int identify(pg_runtime configured, const hook_doc *annotations, hook_identity *id,
                  pg_error *err)
{
    memset(id, 0, sizeof *id); /* the caller releases hints with hook_identity_clear */
    pg_runtime runtime = configured;
    if (runtime == PG_RUNTIME_AUTO) {
        runtime = detect_runtime(annotations);
        if (runtime == PG_RUNTIME_AUTO) {
            id->kind = HOOK_NOT_KUBERNETES;
            return PG_OK;
        }
    }
    if (runtime == PG_RUNTIME_CRIO) {
        /* Explicit cri-o: without CRI-O's marker this is not what we were told to trust. */
        const char *manager = hook_doc_map_get(annotations, CRIO_MANAGER_KEY);
        if (!manager || strcmp(manager, CRIO_MANAGER_VALUE) != 0)
            return pg_fail(err, PG_ERR_INVALID, "runtime cri-o: annotation %s=%s is missing",
                           CRIO_MANAGER_KEY, CRIO_MANAGER_VALUE);
        return identify_crio(annotations, id, err);
    }
    return identify_containerd(annotations, id, err);
}

int hook_identify(pg_runtime configured, const hook_doc *annotations, hook_identity *id,
                  pg_error *err)
{
    int rc = identify(configured, annotations, id, err);
    if (rc != PG_OK)
        hook_identity_clear(id); /* nothing to release after a failure */
    return rc;
}
